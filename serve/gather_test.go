package serve

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/autoui/autoui/api"
)

// decodingServer is a server whose screen decodes wait in beforeDecode
// until released; decoding receives a token as each one starts to wait.
// sizes gives the batch sizes run so far.
func decodingServer(t *testing.T, cfg Config) (s *Server, url string, decoding chan struct{}, release func(), sizes func() []int) {
	t.Helper()
	m := tinyModel(t)
	decoding = make(chan struct{}, 100)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	var mu sync.Mutex
	var got []int
	s, ts := start(t, cfg, &m, func(s *Server) {
		s.beforeDecode = func() { decoding <- struct{}{}; <-gate }
		s.beforeBatch = func(n int) { mu.Lock(); got = append(got, n); mu.Unlock() }
	})
	t.Cleanup(release)
	return s, ts.URL, decoding, release, func() []int { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
}

// postAll sends each body from its own goroutine; wait waits for the
// answers and returns their status codes in order.
func postAll(t *testing.T, url string, bodies ...api.PredictRequest) (wait func() []int) {
	codes := make([]int, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() {
			r, _ := post(t, context.Background(), url, b)
			codes[i] = code(r)
		})
	}
	return func() []int { wg.Wait(); return codes }
}

func receive(t *testing.T, c chan struct{}, n int, what string) {
	t.Helper()
	for range n {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A batch gathered while other requests are still decoding their screens
// waits for them (PrepWait), so they do not wait a whole engine call for
// the next one; with PrepWait off it runs without them.
func TestPrepWaitGathersDecoding(t *testing.T) {
	png := screenBytes(t, "home_720x1280.png")
	for _, tc := range []struct {
		prep  time.Duration
		first int // the feature request's batch
	}{{10 * time.Second, 3}, {-1, 1}} {
		t.Run(fmt.Sprint("prep-wait ", tc.prep), func(t *testing.T) {
			s, url, decoding, release, sizes := decodingServer(t, Config{MaxBatch: 4, BatchWait: -1, PrepWait: tc.prep, Decoders: 4})
			screens := postAll(t, url, api.PredictRequest{Goal: "a", Screen: png}, api.PredictRequest{Goal: "b", Screen: png})
			receive(t, decoding, 2, "two screens decoding")
			features := postAll(t, url, featureRequest(t, "c"))
			if tc.prep < 0 {
				waitFor(t, "the feature request's batch", func() bool { return len(sizes()) == 1 })
			} else {
				time.Sleep(100 * time.Millisecond) // time enough for a batch that does not wait
				if got := sizes(); len(got) != 0 {
					t.Fatalf("batches %v ran with two screens still decoding", got)
				}
			}
			release()
			for i, c := range append(screens(), features()...) {
				if c != 200 {
					t.Errorf("request %d: status %d", i, c)
				}
			}
			if got := sizes(); got[0] != tc.first || sum(got) != 3 {
				t.Errorf("batch sizes %v, want %d first and 3 in all", got, tc.first)
			}
			if n := s.preparing.Load(); n != 0 {
				t.Errorf("%d requests still preparing after all were answered", n)
			}
		})
	}
}

// The wait ends when the requests waited for give up (a screen that does
// not decode), and in any case after PrepWait.
func TestPrepWaitEnds(t *testing.T) {
	t.Run("gave up", func(t *testing.T) {
		s, url, decoding, release, sizes := decodingServer(t, Config{MaxBatch: 4, BatchWait: -1, PrepWait: time.Hour, Decoders: 4})
		bad := postAll(t, url, api.PredictRequest{Goal: "a", Screen: []byte("\x89PNG\r\n\x1a\n not a screen")})
		receive(t, decoding, 1, "the bad screen decoding")
		good := postAll(t, url, featureRequest(t, "b"))
		time.Sleep(50 * time.Millisecond)
		release()
		if c := bad(); c[0] != 400 {
			t.Errorf("bad screen: status %d, want 400", c[0])
		}
		if c := good(); c[0] != 200 {
			t.Errorf("feature request: status %d", c[0])
		}
		if got := sizes(); !slices.Equal(got, []int{1}) {
			t.Errorf("batch sizes %v, want [1]", got)
		}
		if n := s.preparing.Load(); n != 0 {
			t.Errorf("%d requests still preparing", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, url, decoding, release, sizes := decodingServer(t, Config{MaxBatch: 4, BatchWait: -1, PrepWait: 50 * time.Millisecond, Decoders: 4})
		slow := postAll(t, url, api.PredictRequest{Goal: "a", Screen: screenBytes(t, "home_720x1280.png")})
		receive(t, decoding, 1, "the screen decoding")
		fast := postAll(t, url, featureRequest(t, "b"))
		if c := fast(); c[0] != 200 { // answered while the screen still decodes
			t.Errorf("feature request: status %d", c[0])
		}
		release()
		if c := slow(); c[0] != 200 {
			t.Errorf("screen request: status %d", c[0])
		}
		if got := sizes(); !slices.Equal(got, []int{1, 1}) {
			t.Errorf("batch sizes %v, want [1 1]", got)
		}
	})
}
