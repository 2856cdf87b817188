package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/engine/preprocess/imagetest"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/serve/client"
)

// TestCheckBeforeDecode: a request the model refuses (here a goal over the
// engine's size cap) costs no screen decode.
func TestCheckBeforeDecode(t *testing.T) {
	var decodes atomic.Int32
	m := tinyModel(t)
	_, ts := start(t, Config{}, &m, func(s *Server) { s.beforeDecode = func() { decodes.Add(1) } })
	resp, body := post(t, context.Background(), ts.URL, api.PredictRequest{Goal: strings.Repeat("open ", 100<<10),
		Screen: screenBytes(t, "home_720x1280.png")})
	wantError(t, resp, body, 400, KindBadRequest, "goal")
	if n := decodes.Load(); n != 0 {
		t.Errorf("%d screens decoded for a refused request", n)
	}
}

// Hostile load: the configuration of TestHostileLoad and the bound on its
// memory that docs/serve.md states. Live request memory is at most the
// bodies being read and parsed (twice BodyMemory: the bytes and what they
// decode to) and one decoded screen per admitted or batched request
// (bytesPerPixel: 4 for 8-bit PNGs and JPEGs, 8 for 16-bit PNGs), and Go's
// collector lets the heap grow to about twice what is live.
var hostileConfig = Config{Queue: 8, MaxBatch: 4, MaxBody: 4 << 20, BodyMemory: 16 << 20, Decoders: 2}

func memoryBound(c Config, bytesPerPixel int64) int64 {
	c = c.withDefaults()
	live := 2*c.BodyMemory + int64(c.Queue+c.MaxBatch)*bytesPerPixel*int64(c.Decode.MaxPixels)
	return 2 * live
}

// TestHostileLoad: 200 hostile clients (token limits and goals over the
// engine's caps, big and over-cap screens, bodies over the limit, slow
// bodies that never end, junk) beside well-behaved agents. Every
// well-behaved request gets its exact answer (through the client's
// retries), every hostile one a refusal or, for valid big screens, an
// answer, and the process's peak memory stays under memoryBound above its
// start.
func TestHostileLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	p := tiny(t)
	cases := goldenCases(t)
	type want struct {
		req api.PredictRequest
		res *predict.Result
	}
	var wants []want
	for i, c := range cases {
		b := screenBytes(t, filepath.Base(c.Screen))
		res, err := p.Predict(context.Background(), predict.Request{Screen: decodeScreen(t, b), Goal: c.Goal, History: c.History})
		if err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want{api.PredictRequest{Goal: c.Goal, Screen: b, History: c.History}, res})
		if i == 5 {
			break
		}
	}
	bigScreen := opaquePNG(t, 2800, 2800) // 7.84 Mpx, under the cap: decoded, 31 MB each
	overCap := imagetest.HostilePNG(3000, 3000, 0)
	dim := p.Bundle().Manifest.Model.ImageDim
	feats := make([]float32, dim)
	hugeGoal, _ := json.Marshal(api.PredictRequest{Goal: strings.Repeat("tap ", (3<<20)/4), Features: feats})
	manyTokens, _ := json.Marshal(api.PredictRequest{Goal: "g", Features: feats, Options: api.Options{MaxNewTokens: 100_000_000}})
	bigBody, _ := json.Marshal(api.PredictRequest{Goal: "g", Screen: bigScreen})
	overCapBody, _ := json.Marshal(api.PredictRequest{Goal: "g", Screen: overCap})

	runtime.GC()
	resetPeakRSS()
	base := rss(t, "VmRSS")
	var peakHeap atomic.Uint64
	stopSampling := sampleHeap(&peakHeap)

	m := ModelOf(p, "")
	s, ts := start(t, hostileConfig, &m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()

	// Slow bodies: headers, a first bit of body, then a byte now and then
	// until the well-behaved agents are done; they never finish.
	slowDone := make(chan struct{})
	var slow sync.WaitGroup
	for i := range 40 {
		slow.Add(1)
		go func() {
			defer slow.Done()
			conn, err := net.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/predict HTTP/1.1\r\nHost: autoui\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"goal\": \"slow %d", 1<<20, i)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-slowDone:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte("a")); err != nil {
						return
					}
				}
			}
		}()
	}

	// The other hostile clients, each sending its body once.
	type hostile struct {
		name  string
		n     int
		body  []byte
		ct    string
		codes []int // the answers it may get
	}
	kinds := []hostile{
		{"max_new_tokens 1e8", 30, manyTokens, "application/json", []int{400, 429}},
		{"3 MiB goal", 30, hugeGoal, "application/json", []int{400, 429}},
		{"7.8 Mpx screen", 30, bigBody, "application/json", []int{200, 429}},
		{"9 Mpx screen", 20, overCapBody, "application/json", []int{413, 429}},
		{"8 MiB body", 20, bytes.Repeat([]byte(" "), 8<<20), "application/json", []int{413}},
		{"form body", 15, manyTokens, "application/x-www-form-urlencoded", []int{415}},
		{"junk JSON", 15, []byte(`{"goal": "g", "features": [1e999]}`), "application/json", []int{400, 429}},
	}
	var hostileWG sync.WaitGroup
	var hostileCount atomic.Int32
	for _, k := range kinds {
		for range k.n {
			hostileWG.Add(1)
			hostileCount.Add(1)
			go func() {
				defer hostileWG.Done()
				resp, body := post(t, ctx, ts.URL, k.body, "Content-Type", k.ct)
				if resp == nil {
					return // post reported it
				}
				for _, c := range k.codes {
					if resp.StatusCode == c {
						return
					}
				}
				t.Errorf("%s: answered %d %.200s, want one of %v", k.name, resp.StatusCode, body, k.codes)
			}()
		}
	}
	if n := int(hostileCount.Load()) + 40; n != 200 {
		t.Fatalf("%d hostile clients, want 200", n)
	}

	// Well-behaved agents: through the Go client's retries, each request
	// gets the engine's own answer.
	agent, err := client.New(ts.URL, client.Options{MaxWait: 4 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var agents sync.WaitGroup
	var answered atomic.Int32
	for a := range 8 {
		agents.Add(1)
		go func() {
			defer agents.Done()
			for i := range 4 {
				w := wants[(a+i)%len(wants)]
				got, err := agent.PredictRaw(ctx, w.req)
				if err != nil {
					t.Errorf("agent %d request %d: %v", a, i, err)
					continue
				}
				sameResult(t, fmt.Sprintf("agent %d request %d", a, i), *got, w.res)
				answered.Add(1)
			}
		}()
	}
	agents.Wait()
	close(slowDone)
	hostileWG.Wait()
	slow.Wait()
	stopSampling()

	if n := answered.Load(); n != 32 {
		t.Errorf("%d of 32 well-behaved requests answered", n)
	}
	if !s.Ready() {
		t.Error("the server is not ready after the load")
	}
	waitFor(t, "the queue and the body budget to empty", func() bool {
		s.bodies.mu.Lock()
		defer s.bodies.mu.Unlock()
		return len(s.slots) == 0 && s.bodies.used == 0
	})
	bound := memoryBound(hostileConfig, 4) // every screen here is 8-bit
	peak := rss(t, "VmHWM")
	t.Logf("peak RSS %d MB (%d MB at the start, bound %d MB above it); peak Go heap %d MB",
		peak>>20, base>>20, bound>>20, peakHeap.Load()>>20)
	if h := int64(peakHeap.Load()); h > bound {
		t.Errorf("peak Go heap %d MB, more than the bound of %d MB", h>>20, bound>>20)
	}
	// The race detector's shadow memory is RSS the server does not have.
	if peak-base > bound && !raceEnabled {
		t.Errorf("peak RSS %d MB is %d MB over the start, more than the bound of %d MB", peak>>20, (peak-base)>>20, bound>>20)
	}
}

// opaquePNG is a w x h opaque RGB PNG (decoded as 4 bytes a pixel).
func opaquePNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 0xff
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rss reads a size field of /proc/self/status (VmRSS, VmHWM) in bytes.
func rss(t testing.TB, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return kb << 10
		}
	}
	t.Skipf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS starts VmHWM again from the current RSS (Linux 4.0+), so
// that earlier tests in this process do not count.
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// sampleHeap records the peak Go heap in use until stop is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
