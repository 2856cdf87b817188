package serve

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/autoui/autoui/predict"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg             *prometheus.Registry
	requestDuration *prometheus.HistogramVec
	batchRequests   prometheus.Histogram
	stage           *prometheus.HistogramVec
	engine          prometheus.Histogram
	errors          *prometheus.CounterVec
	canceled        prometheus.Counter
	batches         prometheus.Counter
	running         prometheus.Gauge
	rowsBusy        prometheus.Gauge
	dropped         prometheus.Counter
}

// Stages are the values of autoui_stage_seconds' stage label.
// (their sum is about autoui_engine_seconds).
var Stages = []string{"preprocess", "vision", "tokenize", "encoder", "fusion", "decode"}

func newMetrics(maxBatch int, queueDepth func() float64) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "autoui_request_duration_seconds",
			Help:    "Time from the arrival of a POST /v1/predict to its answer, by HTTP status code.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 15),
		}, []string{"code"}),
		batchRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "autoui_batch_requests",
			Help:    "Requests per engine call (PredictBatch).",
			Buckets: batchBuckets(maxBatch),
		}),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "autoui_stage_seconds",
			Help:    "Per-request engine time by stage (predict.Timings; batched stages count the shared call's full time).",
			Buckets: engineBuckets,
		}, []string{"stage"}),
		engine: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "autoui_engine_seconds",
			Help:    "Per-request engine time, all stages (predict.Timings.Total).",
			Buckets: engineBuckets,
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autoui_errors_total",
			Help: "Error answers by kind.",
		}, []string{"kind"}),
		canceled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autoui_canceled_total",
			Help: "Requests whose client went away before their answer (nothing is answered; code 499 in autoui_request_duration_seconds).",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autoui_batches_total",
			Help: "Engine calls (PredictBatch) made; under --continuous, joins of the running decode.",
		}),
		rowsBusy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autoui_rows_busy",
			Help: "Under --continuous: requests decoding in the running decode now (at most --max-batch).",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autoui_batches_running",
			Help: "Engine calls (PredictBatch) running now: at most --concurrent-batches; under --continuous 1 while the continuous decode runs.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autoui_dropped_total",
			Help: "Requests dropped because the client went away or the deadline passed: queued, before their engine call, or (under --continuous) while decoding.",
		}),
	}
	m.reg.MustRegister(m.requestDuration, m.batchRequests, m.stage, m.engine, m.errors, m.canceled, m.batches, m.running, m.rowsBusy, m.dropped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "autoui_queue_depth",
			Help: "Requests admitted and not yet in an engine call (decoding their screen or waiting for the batcher).",
		}, queueDepth),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, k := range Kinds {
		m.errors.WithLabelValues(k)
	}
	return m
}

// batchBuckets are the batch-size histogram's buckets: every size up to 64,
// then powers of two up to maxBatch (its last bucket), so a scrape stays
// small whatever --max-batch is.
func batchBuckets(maxBatch int) []float64 {
	const linear = 64
	b := prometheus.LinearBuckets(1, 1, min(maxBatch, linear))
	for n := 2 * linear; n/2 < maxBatch; n *= 2 {
		b = append(b, float64(min(n, maxBatch)))
	}
	return b
}

var engineBuckets = prometheus.ExponentialBuckets(0.0005, 2, 18)

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observeStages records one result's stage times.
func (m *metrics) observeStages(t predict.Timings) {
	for i, d := range []time.Duration{t.Preprocess, t.Vision, t.Tokenize, t.Encoder, t.Fusion,
		t.FirstStep + t.LaterSteps} {
		m.stage.WithLabelValues(Stages[i]).Observe(d.Seconds())
	}
	m.engine.Observe(t.Total.Seconds())
}
