package tokenizer

import (
	"fmt"
	"math"
	"strconv"
)

// parseScore reads a JSON number the way serde_json does without its float_roundtrip
// feature, which is how Hugging Face tokenizers reads Unigram scores: decimal digits are
// gathered into a u64 (digits past its range are dropped), converted to float64 and
// scaled by one multiplication or division by a power of ten. For numbers of 17 or more
// significant digits this can be one ulp away from the correctly rounded value, and
// Viterbi ties between equally scored segmentations are decided by exactly those bits.
func parseScore(b []byte) (float64, error) {
	i := 0
	positive := true
	if i < len(b) && b[i] == '-' {
		positive = false
		i++
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		return 0, fmt.Errorf("invalid number %q", b)
	}
	const maxU64 = math.MaxUint64
	overflows := func(sig, digit uint64) bool {
		return sig >= maxU64/10 && (sig > maxU64/10 || digit > maxU64%10)
	}
	var sig uint64
	exp := 0
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := uint64(b[i] - '0')
			if overflows(sig, d) {
				exp++ // integer digits past u64 range only scale the value
			} else {
				sig = sig*10 + d
			}
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		dropping := false
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := uint64(b[i] - '0')
			if dropping || overflows(sig, d) || exp > 0 {
				dropping = true
			} else {
				sig = sig*10 + d
				exp--
			}
			i++
		}
		if i == start {
			return 0, fmt.Errorf("invalid number %q", b)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		expPositive := true
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			expPositive = b[i] == '+'
			i++
		}
		start := i
		e := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if e < 1<<20 {
				e = e*10 + int(b[i]-'0')
			}
			i++
		}
		if i == start {
			return 0, fmt.Errorf("invalid number %q", b)
		}
		if expPositive {
			exp += e
		} else {
			exp -= e
		}
	}
	if i != len(b) {
		return 0, fmt.Errorf("invalid number %q", b)
	}
	f := float64(sig)
	for {
		abs := exp
		if abs < 0 {
			abs = -abs
		}
		if abs <= 308 {
			pow := pow10(abs)
			if exp >= 0 {
				f *= pow
				if math.IsInf(f, 0) {
					return 0, fmt.Errorf("number %q out of range", b)
				}
			} else {
				f /= pow
			}
			break
		}
		if f == 0 {
			break
		}
		if exp >= 0 {
			return 0, fmt.Errorf("number %q out of range", b)
		}
		f /= 1e308
		exp += 308
	}
	if !positive {
		f = -f
	}
	return f, nil
}

// pow10 is the correctly rounded float64 of 10^n for 0 <= n <= 308 (Go's ParseFloat of
// "1e<n>"; math.Pow10 is not guaranteed exact for large n).
func pow10(n int) float64 { return pow10Table[n] }

var pow10Table = func() [309]float64 {
	var t [309]float64
	for n := range t {
		var err error
		t[n], err = parseFloatExact(n)
		if err != nil {
			panic(err) // cannot happen: "1e0".."1e308" are valid float64 literals
		}
	}
	return t
}()

func parseFloatExact(n int) (float64, error) { return strconv.ParseFloat("1e"+strconv.Itoa(n), 64) }
