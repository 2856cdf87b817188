package action

import (
	"math"
	"testing"
)

func tap(y, x float64) Action { return Action{Type: DualPoint, Touch: Point{y, x}, Lift: Point{y, x}} }

func swipe(y1, x1, y2, x2 float64) Action {
	return Action{Type: DualPoint, Touch: Point{y1, x1}, Lift: Point{y2, x2}}
}

func next32(v float32) float64 { return float64(math.Nextafter32(v, 2)) }
func prev32(v float32) float64 { return float64(math.Nextafter32(v, -2)) }

func TestIsTap(t *testing.T) {
	f04 := float64(float32(0.04))
	for _, c := range []struct {
		name string
		a    Action
		want bool
	}{
		{"same point", tap(0.3, 0.7), true},
		{"exactly 0.04 in float32", swipe(0, 0.5, f04, 0.5), true},
		{"next float32 above 0.04", swipe(0, 0.5, next32(0.04), 0.5), false},
		{"0.04 as a double is below float32(0.04)", swipe(0, 0.5, 0.04, 0.5), true},
		{"diagonal 0.03,0.02 (0.036)", swipe(0.5, 0.5, 0.53, 0.52), true},
		{"diagonal 0.03,0.03 (0.042)", swipe(0.5, 0.5, 0.53, 0.53), false},
		{"long swipe", swipe(0.8, 0.5, 0.2, 0.5), false},
		{"not DUAL_POINT", Action{Type: PressBack, Touch: NoPoint, Lift: NoPoint}, false},
		{"NaN is a swipe", swipe(math.NaN(), 0.5, 0.5, 0.5), false},
	} {
		if got := IsTap(c.a); got != c.want {
			t.Errorf("%s: IsTap(%v) = %v, want %v", c.name, c.a, got, c.want)
		}
	}
}

func TestMatchRules(t *testing.T) {
	f14 := float64(float32(0.14))
	back := Action{Type: PressBack, Touch: NoPoint, Lift: NoPoint}
	home := Action{Type: PressHome, Touch: NoPoint, Lift: NoPoint}
	typeA := Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "hello"}
	typeB := Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "other"}
	// Box at the top-left corner: the enlarged top/left clamp at 0 but the size
	// stays 2.4x (0.24), so the enlarged box reaches 0.24, not 0.22.
	corner := Box{Y: 0.05, X: 0.05, H: 0.1, W: 0.1}
	// A tall box: its height caps at 1 while its top moves up by 0.35.
	tall := Box{Y: 0.4, X: 0.4, H: 0.5, W: 0.1}
	mid := Box{Y: 0.5, X: 0.5, H: 0.1, W: 0.1}
	e := mid.Enlarge()

	for _, c := range []struct {
		name       string
		pred, gold Action
		boxes      []Box
		want       bool
	}{
		{"taps near", tap(0.5, 0.5), tap(0.58, 0.6), nil, true},
		{"taps 0.1,0.1 apart (0.1414)", tap(0.5, 0.5), tap(0.6, 0.6), nil, false},
		{"taps far", tap(0.1, 0.1), tap(0.9, 0.9), nil, false},
		{"taps exactly float32(0.14) apart", tap(0, 0.5), tap(f14, 0.5), nil, true},
		{"taps next float32 above 0.14 apart", tap(0, 0.5), tap(next32(0.14), 0.5), nil, false},
		{"taps far, both in one enlarged box", tap(0.45, 0.5), tap(0.66, 0.6), []Box{mid}, true},
		{"taps far, one outside the box", tap(0.3, 0.5), tap(0.66, 0.6), []Box{mid}, false},
		{"taps far, in different boxes", tap(0.05, 0.05), tap(0.6, 0.55), []Box{corner, mid}, false},
		{"enlarged box top-left edge inclusive", tap(float64(e.Y), float64(e.X)), tap(0.66, 0.66), []Box{mid}, true},
		{"just above the enlarged top edge", tap(prev32(e.Y), float64(e.X)), tap(0.66, 0.66), []Box{mid}, false},
		{"enlarged box bottom-right edge inclusive", tap(float64(e.Y+e.H), float64(e.X+e.W)), tap(0.45, 0.45), []Box{mid}, true},
		{"just below the enlarged bottom edge", tap(next32(e.Y+e.H), float64(e.X+e.W)), tap(0.45, 0.45), []Box{mid}, false},
		{"clamped corner box keeps its size", tap(0.235, 0.01), tap(0.0, 0.235), []Box{corner}, true},
		{"clamped corner box ends at 0.24", tap(0.245, 0.01), tap(0.0, 0.235), []Box{corner}, false},
		{"tall box: height capped at 1, top moved up", tap(0.06, 0.45), tap(0.95, 0.45), []Box{tall}, true},
		{"tall box: above its top", tap(0.04, 0.45), tap(0.95, 0.45), []Box{tall}, false},
		{"empty boxes: distance rule only, near", tap(0.5, 0.5), tap(0.55, 0.55), []Box{}, true},
		{"empty boxes: distance rule only, far", tap(0.45, 0.5), tap(0.66, 0.6), []Box{}, false},
		{"swipes on y, same sign", swipe(0.8, 0.5, 0.2, 0.5), swipe(0.7, 0.4, 0.1, 0.45), nil, true},
		{"swipes on y, opposite sign", swipe(0.8, 0.5, 0.2, 0.5), swipe(0.2, 0.5, 0.8, 0.5), nil, true},
		{"swipes on x, opposite sign", swipe(0.5, 0.8, 0.5, 0.2), swipe(0.5, 0.2, 0.5, 0.8), nil, true},
		{"swipe y vs swipe x", swipe(0.8, 0.5, 0.2, 0.5), swipe(0.5, 0.8, 0.5, 0.2), nil, false},
		{"tie counts as y: vs y", swipe(0.2, 0.2, 0.5, 0.5), swipe(0.8, 0.5, 0.2, 0.5), nil, true},
		{"tie counts as y: vs x", swipe(0.2, 0.2, 0.5, 0.5), swipe(0.5, 0.8, 0.5, 0.2), nil, false},
		{"swipes ignore boxes and distance", swipe(0.1, 0.1, 0.9, 0.1), swipe(0.9, 0.9, 0.3, 0.95), []Box{mid}, true},
		{"tap vs swipe, same touch", tap(0.5, 0.5), swipe(0.5, 0.5, 0.9, 0.5), []Box{mid}, false},
		{"swipe vs tap", swipe(0.5, 0.5, 0.9, 0.5), tap(0.5, 0.5), nil, false},
		{"DUAL_POINT vs TYPE", tap(0.5, 0.5), typeA, nil, false},
		{"TYPE vs TYPE, different text", typeA, typeB, nil, true},
		{"BACK vs BACK", back, back, nil, true},
		{"BACK vs HOME", back, home, nil, false},
		{"non-gesture with stray points still by type", Action{Type: PressBack, Touch: Point{0.1, 0.1}, Lift: Point{0.9, 0.9}}, back, nil, true},
	} {
		if got := Match(c.pred, c.gold, c.boxes); got != c.want {
			t.Errorf("%s: Match(%v, %v) = %v, want %v", c.name, c.pred, c.gold, got, c.want)
		}
		// AITW's rule is symmetric.
		if got := Match(c.gold, c.pred, c.boxes); got != c.want {
			t.Errorf("%s (swapped): Match = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEnlarge(t *testing.T) {
	e := Box{Y: 0.05, X: 0.5, H: 0.1, W: 0.5}.Enlarge()
	want := Box{Y: 0, X: 0.5 - float32(1.4)*0.5/2, H: 0.1 + float32(1.4)*0.1, W: 1}
	if e != want {
		t.Errorf("Enlarge = %+v, want %+v", e, want)
	}
}

func TestMatchTypeOnly(t *testing.T) {
	if !MatchTypeOnly(tap(0.1, 0.1), swipe(0.8, 0.5, 0.2, 0.5)) {
		t.Error("tap and swipe are both DUAL_POINT")
	}
	if MatchTypeOnly(tap(0.1, 0.1), Action{Type: PressEnter}) {
		t.Error("DUAL_POINT vs PRESS_ENTER")
	}
}

func TestTextMatch(t *testing.T) {
	for _, c := range []struct {
		pred, gold string
		want       bool
	}{
		{"hello", "hello", true},
		{"Hello World", "hello world", true},
		{"hello", "hello world", true},
		{"hello world", "world", true},
		{"  hello  ", "hello", true},     // the prediction is stripped
		{"hello", "  hello world", true}, // the gold is not, but contains it
		{"hello", "help", false},
		{"", "anything", true}, // empty is contained in everything
		{"x", "", true},
		{"ÄPFEL", "äpfel kaufen", true},
	} {
		if got := TextMatch(c.pred, c.gold); got != c.want {
			t.Errorf("TextMatch(%q, %q) = %v, want %v", c.pred, c.gold, got, c.want)
		}
	}
}

// Enlarge64 against JAX 0.4.30 (x64 off) on a float64 numpy array of the
// same box: float32(0.462522953748703), 0.26, float32(0.4514443576335907),
// 0.48; Enlarge (float32 array) gives 0.4625229835510254 and
// 0.4514443278312683 instead.
func TestEnlarge64(t *testing.T) {
	b := Box{Y: 0.59419423, X: 0.4, H: 0.18810181, W: 0.2}
	want := Box{Y: float32(0.462522953748703), X: float32(0.25999999046325684), H: float32(0.4514443576335907), W: float32(0.48000001907348633)}
	if got := b.Enlarge64(); got != want {
		t.Errorf("Enlarge64 = %+v, want %+v", got, want)
	}
	want32 := Box{Y: float32(0.4625229835510254), X: float32(0.25999999046325684), H: float32(0.4514443278312683), W: float32(0.48000001907348633)}
	if got := b.Enlarge(); got != want32 {
		t.Errorf("Enlarge = %+v, want %+v", got, want32)
	}
}
