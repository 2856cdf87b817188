package action

import (
	"encoding/json"
	"math"
	"os"
	"sync"
	"testing"
)

// golden is action/testdata/render_golden.json, written by CPython
// (python -m scripts.action_golden).
type golden struct {
	Repr []struct {
		X    float64 `json:"x"`
		Repr string  `json:"repr"`
	} `json:"repr"`
	Round4 []struct {
		X     float64 `json:"x"`
		Round float64 `json:"round"`
		Repr  string  `json:"repr"`
	} `json:"round4"`
	Render []struct {
		goldenAction
		Out string `json:"out"`
	} `json:"render"`
	Normalize []struct {
		goldenAction
		Plan   []string `json:"plan"`
		Fixed  string   `json:"fixed"`
		Legacy string   `json:"legacy"`
	} `json:"normalize"`
	Match []struct {
		Pred  goldenAction `json:"pred"`
		Gold  goldenAction `json:"gold"`
		Boxes [][4]float32 `json:"boxes"`
		Match bool         `json:"match"`
	} `json:"match"`
}

type goldenAction struct {
	Type  string     `json:"type"`
	Touch [2]float64 `json:"touch"`
	Lift  [2]float64 `json:"lift"`
	Text  string     `json:"text"`
}

func (g goldenAction) action(t *testing.T) Action {
	t.Helper()
	typ, err := ParseType(g.Type)
	if err != nil {
		t.Fatal(err)
	}
	return Action{Type: typ, Touch: Point{g.Touch[0], g.Touch[1]}, Lift: Point{g.Lift[0], g.Lift[1]}, Text: g.Text}
}

var loadGolden = sync.OnceValues(func() (*golden, error) {
	data, err := os.ReadFile("testdata/render_golden.json")
	if err != nil {
		return nil, err
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, err
	}
	return &g, nil
})

func goldenData(t *testing.T) *golden {
	t.Helper()
	g, err := loadGolden()
	if err != nil {
		t.Fatalf("load golden table: %v", err)
	}
	return g
}

func TestPyFloatGolden(t *testing.T) {
	g := goldenData(t)
	if len(g.Repr) < 500 {
		t.Fatalf("golden repr table has %d rows", len(g.Repr))
	}
	for _, c := range g.Repr {
		if got := PyFloat(c.X); got != c.Repr {
			t.Errorf("PyFloat(%v) = %q, Python repr %q", c.X, got, c.Repr)
		}
	}
}

func TestPyFloatSpecial(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{math.NaN(), "nan"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"},
		{math.Copysign(0, -1), "-0.0"}, {0, "0.0"}, {-1, "-1.0"},
		{1e16, "1e+16"}, {9999999999999998, "9999999999999998.0"}, {0.0001, "0.0001"}, {0.00001, "1e-05"},
		{-1.5e-10, "-1.5e-10"}, {1e100, "1e+100"},
	} {
		if got := PyFloat(c.x); got != c.want {
			t.Errorf("PyFloat(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestPyRound4Golden(t *testing.T) {
	g := goldenData(t)
	for _, c := range g.Round4 {
		got := PyRound4(c.X)
		if math.Float64bits(got) != math.Float64bits(c.Round) {
			t.Errorf("PyRound4(%v) = %v, Python round(x, 4) = %v", c.X, got, c.Round)
		}
		if s := PyFloat(got); s != c.Repr {
			t.Errorf("repr(round(%v, 4)) = %q, Python %q", c.X, s, c.Repr)
		}
	}
}

func TestRenderGolden(t *testing.T) {
	g := goldenData(t)
	if len(g.Render) < 100 {
		t.Fatalf("golden render table has %d rows", len(g.Render))
	}
	for _, c := range g.Render {
		if got := c.action(t).String(); got != c.Out {
			t.Errorf("render %+v:\n got %s\nwant %s", c.goldenAction, got, c.Out)
		}
	}
}

func TestNormalizeTargetGolden(t *testing.T) {
	g := goldenData(t)
	if len(g.Normalize) < 200 {
		t.Fatalf("golden normalize table has %d rows", len(g.Normalize))
	}
	for _, c := range g.Normalize {
		a := c.action(t)
		var plan []Type
		for _, n := range c.Plan {
			typ, err := ParseType(n)
			if err != nil {
				t.Fatal(err)
			}
			plan = append(plan, typ)
		}
		for _, m := range []struct {
			m    ScrollMap
			want string
		}{{ScrollFixed, c.Fixed}, {ScrollLegacy, c.Legacy}} {
			if got := Target(plan, Normalize(a, m.m)); got != m.want {
				t.Errorf("Target(Normalize(%+v, %s)):\n got %s\nwant %s", c.goldenAction, m.m, got, m.want)
			}
		}
	}
}

func TestMatchGolden(t *testing.T) {
	g := goldenData(t)
	matched := 0
	for i, c := range g.Match {
		boxes := make([]Box, len(c.Boxes))
		for j, b := range c.Boxes {
			boxes[j] = Box{Y: b[0], X: b[1], H: b[2], W: b[3]}
		}
		got := Match(c.Pred.action(t), c.Gold.action(t), boxes)
		if got != c.Match {
			t.Errorf("case %d: Match(%+v, %+v, %v) = %v, AITW %v", i, c.Pred, c.Gold, c.Boxes, got, c.Match)
		}
		if got {
			matched++
		}
	}
	// The table must exercise both outcomes.
	if matched < len(g.Match)/10 || matched > len(g.Match)*9/10 {
		t.Errorf("golden match table is lopsided: %d of %d match", matched, len(g.Match))
	}
}
