package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// ReadReport reads a report.json a run wrote. A report of another shape
// version is refused: its fields may not mean what this harness reads.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("loadtest: report %s: %w", path, err)
	}
	if r.Version != ReportVersion {
		return nil, fmt.Errorf("loadtest: report %s has shape version %d, this harness reads %d", path, r.Version, ReportVersion)
	}
	return &r, nil
}

// compareRow is one figure of both reports: its two cells and, for
// numbers, B over A.
type compareRow struct {
	name   string
	a, b   string
	ratio  string
	header bool
}

// Compare writes one table of two reports side by side: every target (by
// name and configuration, in A's order, then those only B has) with its
// value and verdict, each configuration's max-phase requests/s and p99 and
// rate-phase p99, and the scale scenario's import figures when a report has
// them; numbers get the ratio B/A. Reading a change's effect is reading one
// column.
func Compare(w io.Writer, a, b *Report, nameA, nameB string) error {
	var rows []compareRow
	rows = append(rows,
		compareRow{name: "scenario", a: a.Scenario + " " + a.Settings.Profile + fmt.Sprintf(" %d UTXOs", a.Settings.UTXOs),
			b: b.Scenario + " " + b.Settings.Profile + fmt.Sprintf(" %d UTXOs", b.Settings.UTXOs)},
		compareRow{name: "load average (start; end)", a: a.Machine.LoadAvgStart + "; " + a.Machine.LoadAvgEnd,
			b: b.Machine.LoadAvgStart + "; " + b.Machine.LoadAvgEnd},
	)
	type key struct{ target, config string }
	verdicts := func(r *Report) (map[key]Verdict, []key) {
		m := map[key]Verdict{}
		var order []key
		for _, v := range r.Targets {
			k := key{v.Target, v.Config}
			if _, dup := m[k]; !dup {
				order = append(order, k)
			}
			m[k] = v
		}
		return m, order
	}
	va, orderA := verdicts(a)
	vb, orderB := verdicts(b)
	order := orderA
	for _, k := range orderB {
		if _, ok := va[k]; !ok {
			order = append(order, k)
		}
	}
	if len(order) > 0 {
		rows = append(rows, compareRow{name: "targets", header: true})
	}
	cell := func(v Verdict, ok bool) string {
		if !ok {
			return "-"
		}
		return v.Status + " " + v.Value
	}
	for _, k := range order {
		name := k.target
		if k.config != "" {
			name += " [" + k.config + "]"
		}
		x, okA := va[k]
		y, okB := vb[k]
		rows = append(rows, compareRow{name: name, a: cell(x, okA), b: cell(y, okB)})
	}
	configs := func(r *Report) map[string]ConfigResult {
		m := map[string]ConfigResult{}
		for _, c := range r.Configs {
			m[c.Name] = c
		}
		return m
	}
	ca, cb := configs(a), configs(b)
	var names []string
	for _, c := range a.Configs {
		names = append(names, c.Name)
	}
	for _, c := range b.Configs {
		if _, ok := ca[c.Name]; !ok {
			names = append(names, c.Name)
		}
	}
	if len(names) > 0 {
		rows = append(rows, compareRow{name: "configurations", header: true})
	}
	for _, n := range names {
		x, okA := ca[n]
		y, okB := cb[n]
		figure := func(label, unit string, f func(ConfigResult) float64) {
			row := compareRow{name: n + " " + label, a: "-", b: "-"}
			var fa, fb float64
			if okA {
				fa = f(x)
				row.a = fmt.Sprintf("%.2f%s", fa, unit)
			}
			if okB {
				fb = f(y)
				row.b = fmt.Sprintf("%.2f%s", fb, unit)
			}
			if okA && okB && fa > 0 {
				row.ratio = fmt.Sprintf("%.2f", fb/fa)
			}
			rows = append(rows, row)
		}
		figure("max req/s", "", func(c ConfigResult) float64 { return c.Max.AchievedRate })
		figure("p99 @max", " ms", func(c ConfigResult) float64 { return c.Max.Latency.P99 })
		figure("p99 @rate", " ms", func(c ConfigResult) float64 { return c.Rate.Latency.P99 })
	}
	if a.Scale != nil || b.Scale != nil {
		rows = append(rows, compareRow{name: "import (scale)", header: true})
		for _, f := range scaleFigures {
			row := compareRow{name: f.name, a: "-", b: "-"}
			var fa, fb float64
			if a.Scale != nil {
				fa = f.get(a.Scale)
				row.a = fmt.Sprintf(f.format, fa)
			}
			if b.Scale != nil {
				fb = f.get(b.Scale)
				row.b = fmt.Sprintf(f.format, fb)
			}
			if a.Scale != nil && b.Scale != nil && fa > 0 {
				row.ratio = fmt.Sprintf("%.2f", fb/fa)
			}
			rows = append(rows, row)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tA: %s\tB: %s\tB/A\n", nameA, nameB)
	for _, r := range rows {
		if r.header {
			fmt.Fprintf(tw, "-- %s\t\t\t\n", r.name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, r.a, r.b, r.ratio)
	}
	return tw.Flush()
}
