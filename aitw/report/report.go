// Package report writes the self-contained HTML report of `autoui eval
// score`: the metrics table, an action-type confusion matrix and annotated
// screens (gold vs predicted) for a sample of right and wrong steps.
package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image"
	"image/png"
	"io"
	"math/rand"
	"sort"

	"golang.org/x/image/draw"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw/score"
	"github.com/autoui/autoui/annotate"
)

// Sample picks up to n right and n wrong steps, reproducibly (seeded
// shuffle), so the report shows a spread rather than the first episodes.
func Sample(results []score.StepResult, n int, seed int64) (right, wrong []score.StepResult) {
	idx := rand.New(rand.NewSource(seed)).Perm(len(results))
	for _, i := range idx {
		r := results[i]
		if r.Match && len(right) < n {
			right = append(right, r)
		} else if !r.Match && len(wrong) < n {
			wrong = append(wrong, r)
		}
		if len(right) >= n && len(wrong) >= n {
			break
		}
	}
	order := func(s []score.StepResult) {
		sort.Slice(s, func(i, j int) bool {
			if s[i].EpisodeID != s[j].EpisodeID {
				return s[i].EpisodeID < s[j].EpisodeID
			}
			return s[i].StepID < s[j].StepID
		})
	}
	order(right)
	order(wrong)
	return right, wrong
}

// Screen is one sampled step to show; Image is the gold screenshot (nil when
// the gold data has no pixels, e.g. Auto-UI pickles).
type Screen struct {
	Result score.StepResult
	Goal   string
	Image  image.Image
}

// Options for the HTML page.
type Options struct {
	Title string
	// MaxHeight scales screenshots down to this many pixels (default 480).
	MaxHeight int
	// Notes are extra lines shown under the title (inputs, counts).
	Notes []string
}

type cell struct {
	Text  string
	Class string
}

type shot struct {
	Title   string
	Goal    string
	Gold    string
	Pred    string
	DataURI template.URL
}

type page struct {
	Title     string
	Notes     []string
	Header    []string
	Rows      [][]cell
	ConfHead  []string
	ConfRows  [][]cell
	Right     []shot
	Wrong     []shot
	HasImages bool
}

// WriteHTML writes the report.
func WriteHTML(w io.Writer, rep *score.Report, right, wrong []Screen, opts Options) error {
	if opts.MaxHeight <= 0 {
		opts.MaxHeight = 480
	}
	p := page{Title: opts.Title, Notes: opts.Notes}
	if p.Title == "" {
		p.Title = "AITW evaluation"
	}
	p.Header = append(p.Header, "subset")
	for _, c := range score.Columns {
		p.Header = append(p.Header, c.Title)
	}
	p.Header = append(p.Header, "steps", "episodes", "missing")
	row := func(name string, m score.Metrics, class string) []cell {
		r := []cell{{Text: name, Class: class}}
		for _, v := range m.Values() {
			r = append(r, cell{Text: score.FormatPct(v), Class: class})
		}
		return append(r, cell{Text: fmt.Sprint(m.Steps), Class: class}, cell{Text: fmt.Sprint(m.Episodes), Class: class},
			cell{Text: fmt.Sprint(m.Missing), Class: class})
	}
	for _, s := range rep.SubsetNames() {
		p.Rows = append(p.Rows, row(s, rep.Subsets[s], ""))
	}
	p.Rows = append(p.Rows, row("overall", rep.Overall, "total"))
	p.ConfHead, p.ConfRows = confusion(rep.Confusion)
	var err error
	if p.Right, err = shots(right, opts.MaxHeight); err != nil {
		return err
	}
	if p.Wrong, err = shots(wrong, opts.MaxHeight); err != nil {
		return err
	}
	for _, s := range append(p.Right, p.Wrong...) {
		if s.DataURI != "" {
			p.HasImages = true
		}
	}
	return pageTmpl.Execute(w, p)
}

// confusion lays out gold type (rows) x predicted type (columns); predicted
// type 0 is a missing or unparsed prediction.
func confusion(m map[action.Type]map[action.Type]int) ([]string, [][]cell) {
	cols := map[action.Type]bool{}
	var golds []action.Type
	for g, row := range m {
		golds = append(golds, g)
		for p := range row {
			cols[p] = true
		}
	}
	for _, t := range golds {
		cols[t] = true
	}
	var ct []action.Type
	for t := range cols {
		ct = append(ct, t)
	}
	sort.Slice(ct, func(i, j int) bool { return ct[i] < ct[j] })
	sort.Slice(golds, func(i, j int) bool { return golds[i] < golds[j] })
	name := func(t action.Type) string {
		if t == 0 {
			return "missing / unparsed"
		}
		return t.String()
	}
	head := []string{"gold \\ predicted"}
	for _, t := range ct {
		head = append(head, name(t))
	}
	var rows [][]cell
	for _, g := range golds {
		r := []cell{{Text: name(g)}}
		for _, t := range ct {
			n := m[g][t]
			c := cell{Text: fmt.Sprint(n)}
			switch {
			case n == 0:
				c.Class = "zero"
			case t == g:
				c.Class = "diag"
			default:
				c.Class = "off"
			}
			r = append(r, c)
		}
		rows = append(rows, r)
	}
	return head, rows
}

func shots(screens []Screen, maxH int) ([]shot, error) {
	var out []shot
	for _, s := range screens {
		r := s.Result
		sh := shot{
			Title: fmt.Sprintf("%s · episode %s · step %d", r.Subset, r.EpisodeID, r.StepID),
			Goal:  s.Goal,
			Gold:  action.Describe(r.Gold),
			Pred:  action.Describe(r.Pred),
		}
		if r.Missing {
			sh.Pred = "no prediction"
		}
		if s.Image != nil {
			img := scaleDown(s.Image, maxH)
			var buf bytes.Buffer
			if err := png.Encode(&buf, annotate.Compare(img, r.Gold, r.Pred)); err != nil {
				return nil, fmt.Errorf("html report: encode screen: %w", err)
			}
			sh.DataURI = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()))
		}
		out = append(out, sh)
	}
	return out, nil
}

func scaleDown(img image.Image, maxH int) image.Image {
	b := img.Bounds()
	if b.Dy() <= maxH {
		return img
	}
	w := b.Dx() * maxH / b.Dy()
	if w < 1 {
		w = 1
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, maxH))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	return dst
}

var pageTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0;background:#fff}
th,td{border:1px solid #ddd;padding:4px 10px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
tr.total td,td.total{font-weight:600;background:#f6f6ff}
td.diag{background:#d9f2d9}td.off{background:#f9dcdc}td.zero{color:#bbb}
.notes{color:#666;font-size:13px}
.grid{display:flex;flex-wrap:wrap;gap:16px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px;max-width:300px;font-size:12px}
.card img{max-width:100%;display:block;margin-bottom:6px}
.card .t{font-weight:600}.gold{color:#1a7f37}.pred{color:#b3261e}
.legend{font-size:13px}
</style></head><body>
<h1>{{.Title}}</h1>
{{range .Notes}}<div class="notes">{{.}}</div>{{end}}
<h2>Scores (%)</h2>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td class="{{.Class}}">{{.Text}}</td>{{end}}</tr>{{end}}</table>
<div class="notes">screen: action match over all steps (Auto-UI); episode: mean per-episode accuracy (AITW);
type: action type; click/scroll: match over gold taps/swipes; text: gold TYPE steps matched with the text contained either way. "-": no such gold steps. Missing predictions count as wrong.</div>
<h2>Action types</h2>
<table><tr>{{range .ConfHead}}<th>{{.}}</th>{{end}}</tr>
{{range .ConfRows}}<tr>{{range .}}<td class="{{.Class}}">{{.Text}}</td>{{end}}</tr>{{end}}</table>
{{if .HasImages}}<p class="legend">On the screens: <span class="gold">gold</span> and <span class="pred">predicted</span> action.</p>{{end}}
<h2>Wrong steps (sample)</h2>
<div class="grid">{{range .Wrong}}<div class="card">{{if .DataURI}}<img src="{{.DataURI}}" alt="screen">{{end}}
<div class="t">{{.Title}}</div><div>{{.Goal}}</div><div class="gold">gold: {{.Gold}}</div><div class="pred">predicted: {{.Pred}}</div></div>{{else}}<p>none</p>{{end}}</div>
<h2>Right steps (sample)</h2>
<div class="grid">{{range .Right}}<div class="card">{{if .DataURI}}<img src="{{.DataURI}}" alt="screen">{{end}}
<div class="t">{{.Title}}</div><div>{{.Goal}}</div><div class="gold">gold: {{.Gold}}</div><div class="pred">predicted: {{.Pred}}</div></div>{{else}}<p>none</p>{{end}}</div>
</body></html>
`))
