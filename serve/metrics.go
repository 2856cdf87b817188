package serve

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/autoui/autoui/engine"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg             *prometheus.Registry
	requestDuration *prometheus.HistogramVec
	batchSize       prometheus.Histogram
	stage           *prometheus.HistogramVec
	errors          *prometheus.CounterVec
	batches         prometheus.Counter
	dropped         prometheus.Counter
}

// Stages are the values of autoui_stage_seconds' stage label.
var Stages = []string{"preprocess", "vision", "tokenize", "encoder", "fusion", "decode", "total"}

func newMetrics(maxBatch int, queueDepth func() float64) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "autoui_request_duration_seconds",
			Help:    "Time from the arrival of a POST /v1/predict to its answer, by HTTP status code.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 15),
		}, []string{"code"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "autoui_batch_size",
			Help:    "Requests per engine call (PredictBatch).",
			Buckets: prometheus.LinearBuckets(1, 1, maxBatch),
		}),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "autoui_stage_seconds",
			Help:    "Per-request engine time by stage (engine.Timings; batched stages count the shared call's full time).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"stage"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autoui_errors_total",
			Help: "Error answers (and requests whose client went away) by kind.",
		}, []string{"kind"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autoui_batches_total",
			Help: "Engine calls (PredictBatch) made.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autoui_dropped_total",
			Help: "Queued requests dropped before their engine call because the client went away or the deadline passed.",
		}),
	}
	m.reg.MustRegister(m.requestDuration, m.batchSize, m.stage, m.errors, m.batches, m.dropped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "autoui_queue_depth",
			Help: "Decoded requests waiting for the batcher.",
		}, queueDepth),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, k := range []string{KindBadRequest, KindUnauthorized, KindTooLarge, KindQueueFull, KindDeadline,
		KindShuttingDown, KindNotReady, KindInternal, KindMethodNotAllowed, kindCanceled} {
		m.errors.WithLabelValues(k)
	}
	return m
}

// kindCanceled counts requests whose client went away (nothing is answered).
const kindCanceled = "canceled"

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// observeStages records one result's stage times.
func (m *metrics) observeStages(t engine.Timings) {
	for i, d := range []time.Duration{t.Preprocess, t.Vision, t.Tokenize, t.Encoder, t.Fusion,
		t.FirstStep + t.LaterSteps, t.Total} {
		m.stage.WithLabelValues(Stages[i]).Observe(d.Seconds())
	}
}
