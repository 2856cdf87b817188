package score

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/autoui/autoui/aitw"
)

// Columns are the table's metric columns, in order, with their JSON names.
var Columns = []struct{ Title, Key string }{
	{"screen", "screen_accuracy"},
	{"episode", "episode_accuracy"},
	{"type", "action_type_accuracy"},
	{"click", "click_accuracy"},
	{"scroll", "scroll_accuracy"},
	{"text", "text_accuracy"},
}

// Values returns the accuracies in Columns order.
func (m Metrics) Values() []*float64 {
	return []*float64{m.ScreenAccuracy, m.EpisodeAccuracy, m.ActionTypeAccuracy, m.ClickAccuracy, m.ScrollAccuracy, m.TextAccuracy}
}

// SubsetNames lists the report's subsets in aitw.Subsets order, unknown
// names after them alphabetically.
func (r *Report) SubsetNames() []string {
	var out []string
	for _, s := range aitw.Subsets {
		if _, ok := r.Subsets[s]; ok {
			out = append(out, s)
		}
	}
	var rest []string
	for s := range r.Subsets {
		if !aitw.ValidSubset(s) {
			rest = append(rest, s)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// FormatPct renders an accuracy with two decimals, "-" for null.
func FormatPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

// WriteTable prints the report as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "subset\t")
	for _, c := range Columns {
		fmt.Fprintf(tw, "%s\t", c.Title)
	}
	fmt.Fprintln(tw, "steps\tepisodes\tmissing\t")
	row := func(name string, m Metrics) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, v := range m.Values() {
			fmt.Fprintf(tw, "%s\t", FormatPct(v))
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t\n", m.Steps, m.Episodes, m.Missing)
	}
	for _, s := range r.SubsetNames() {
		row(s, r.Subsets[s])
	}
	row("overall", r.Overall)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Overall.Missing > 0 {
		fmt.Fprintf(w, "%d gold steps have no prediction (counted wrong)\n", r.Overall.Missing)
	}
	if r.Unmatched > 0 {
		fmt.Fprintf(w, "%d predictions are for steps not in the gold data (ignored)\n", r.Unmatched)
	}
	return nil
}
