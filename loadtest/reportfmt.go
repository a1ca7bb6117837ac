package loadtest

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// table is a header row and data rows, rendered as Markdown or HTML.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		esc := make([]string, len(r))
		for i, c := range r {
			esc[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(esc, " | ") + " |\n")
	}
	return b.String()
}

func (t *table) html() string {
	var b strings.Builder
	b.WriteString("<table><tr>")
	for _, h := range t.head {
		b.WriteString("<th>" + html.EscapeString(h) + "</th>")
	}
	b.WriteString("</tr>\n")
	for _, r := range t.rows {
		b.WriteString("<tr>")
		for _, c := range r {
			class := ""
			switch c {
			case "PASS":
				class = ` class="pass"`
			case "MISS":
				class = ` class="miss"`
			}
			b.WriteString("<td" + class + ">" + html.EscapeString(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	return b.String()
}

func ms(v float64) string { return fmt.Sprintf("%.2f", v) }

// phases are the configuration's measured phases in run order.
func (c *ConfigResult) phases() []*PhaseResult {
	ps := []*PhaseResult{&c.Max, &c.Rate}
	if c.Hot != nil {
		ps = append(ps, c.Hot)
	}
	for i := range c.RatesAs {
		ps = append(ps, &c.RatesAs[i].Phase)
	}
	return ps
}

// hotCell renders the hot phase's requests/s and ceiling ratio.
func (c *ConfigResult) hotCell() string {
	if c.Hot == nil {
		return "-"
	}
	if c.HotCeilingRatio > 0 {
		return fmt.Sprintf("%.0f (%.2f)", c.Hot.AchievedRate, c.HotCeilingRatio)
	}
	return fmt.Sprintf("%.0f", c.Hot.AchievedRate)
}

func (r *Report) headlineTable() *table {
	t := &table{head: []string{"config", "max req/s", "× ceiling", "p99 @max ms", "rate req/s (offered)", "p99 @rate ms",
		"hot req/s (× ceiling)", "hit ratio (max)", "hit ratio (rate)", "svc CPU cores (max)", "svc RSS peak MiB", "5xx", "mismatches"}}
	for _, c := range r.Configs {
		ratio, cpu, rss := "-", "-", "-"
		if c.CeilingRatio > 0 {
			ratio = fmt.Sprintf("%.2f", c.CeilingRatio)
		}
		if s := c.Max.Service; s != nil {
			cpu = fmt.Sprintf("%.2f", s.CPUCores)
			rss = fmt.Sprintf("%d", max(s.RSSPeak, maxRSS(c.Rate.Service))>>20)
		}
		var mism int64
		for _, p := range []*PhaseResult{&c.Max, &c.Rate} {
			if p.Checks != nil {
				mism += p.Checks.Mismatches
			}
		}
		t.add(c.Name, fmt.Sprintf("%.0f", c.Max.AchievedRate), ratio, ms(c.Max.Latency.P99),
			fmt.Sprintf("%.0f (%.0f)", c.Rate.AchievedRate, c.Rate.OfferedRate), ms(c.Rate.Latency.P99), c.hotCell(),
			hitRatios(c.Max.Cache), hitRatios(c.Rate.Cache), cpu, rss,
			fmt.Sprint(count5xx(c.Max.Errors)+count5xx(c.Rate.Errors)), fmt.Sprint(mism))
	}
	return t
}

func (r *Report) targetsTable() *table {
	t := &table{head: []string{"status", "target", "value", "detail"}}
	for _, v := range r.Targets {
		t.add(v.Status, v.Target, v.Value, v.Detail)
	}
	return t
}

func endpointsTable(p *PhaseResult) *table {
	t := &table{head: []string{"endpoint", "count", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "statuses"}}
	row := func(name string, l LatencySummary, status map[string]int64) {
		var st []string
		for _, code := range sortedKeys(status) {
			st = append(st, fmt.Sprintf("%s×%d", code, status[code]))
		}
		t.add(name, fmt.Sprint(l.Count), ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max), strings.Join(st, " "))
	}
	for _, k := range kindNames {
		if e, ok := p.Endpoints[k]; ok {
			row(k, e.Latency, e.Status)
		}
	}
	row("all", p.Latency, nil)
	return t
}

// phaseNotes are the lines under a phase's endpoint table.
func phaseNotes(p *PhaseResult) []string {
	var n []string
	rate := fmt.Sprintf("%s loop, %d workers, %.1f s: %d requests, %.0f req/s achieved", p.Mode, p.Workers, p.Seconds, p.Requests, p.AchievedRate)
	if p.OfferedRate > 0 {
		rate += fmt.Sprintf(" of %.0f offered", p.OfferedRate)
	}
	n = append(n, rate)
	if p.SendLag != nil {
		n = append(n, fmt.Sprintf("send lag (harness behind schedule): p99 %.2f ms, max %.2f ms", p.SendLag.P99, p.SendLag.Max))
	}
	if len(p.Errors) > 0 {
		var e []string
		for _, c := range sortedKeys(p.Errors) {
			e = append(e, fmt.Sprintf("%s %d", c, p.Errors[c]))
		}
		n = append(n, "errors: "+strings.Join(e, ", "))
	} else {
		n = append(n, "errors: none")
	}
	if c := p.Cache; c != nil {
		var parts []string
		for _, name := range sortedKeys(c.Tiers) {
			t := c.Tiers[name]
			parts = append(parts, fmt.Sprintf("%s %.0f hits / %.0f misses (%.3f)", name, t.Hits, t.Misses, t.HitRatio))
		}
		if len(parts) == 0 {
			parts = append(parts, "no cache tiers")
		}
		n = append(n, fmt.Sprintf("cache: %s; disk reads %.0f", strings.Join(parts, ", "), c.DiskReads))
	}
	if s := p.Service; s != nil {
		n = append(n, fmt.Sprintf("service: %.2f CPU s (%.2f cores), RSS peak %d MiB", s.CPUSeconds, s.CPUCores, s.RSSPeak>>20))
	}
	if s := p.Harness; s != nil {
		n = append(n, fmt.Sprintf("harness: %.2f CPU s (%.2f cores), RSS peak %d MiB", s.CPUSeconds, s.CPUCores, s.RSSPeak>>20))
	}
	if f := p.Feed; f != nil {
		n = append(n, fmt.Sprintf("feed: %d blocks (%.2f/s of %.0f), %d rollbacks; apply p50 %.2f p99 %.2f max %.2f ms; rollback p99 %.2f ms",
			f.Blocks, f.AchievedRate, f.TargetRate, f.Rollbacks, f.Apply.P50, f.Apply.P99, f.Apply.Max, f.Rollback.P99))
		for _, t := range sortedKeys(f.Visible) {
			v := f.Visible[t]
			n = append(n, fmt.Sprintf("commit-to-visible on %s: p50 %.2f p99 %.2f max %.2f ms (%d blocks, %d shown by the first poll)",
				t, v.P50, v.P99, v.Max, v.Count, f.FirstPoll[t]))
		}
		if f.NotVisible > 0 {
			n = append(n, fmt.Sprintf("%d blocks not visible within %s", f.NotVisible, visibleTimeout))
		}
		if rr := f.Replication; rr != nil {
			n = append(n, fmt.Sprintf("replication lag on %s (writer acknowledgement to the replica's answer to GET /v1/tip?min_seq=S): "+
				"p50 %.2f p90 %.2f p99 %.2f max %.2f ms (%d of %d acknowledged writes; %d not reached within %s or by the phase's end, %d not observed)",
				rr.Replica, rr.Lag.P50, rr.Lag.P90, rr.Lag.P99, rr.Lag.Max, rr.Lag.Count, rr.Writes, rr.NotReached, lagTimeout, rr.Unobserved))
			if rr.ReplicaApplied > 0 {
				n = append(n, fmt.Sprintf("the replica applied %d changes, %.2f ms each on average (apply, verify, publish: utxo_cache_replica_apply_seconds); "+
					"the rest of the lag is the delivery from the writer and the wait for the replica's CPU", rr.ReplicaApplied, rr.ReplicaApplyMeanMs))
			}
			for _, e := range rr.Errors {
				n = append(n, "replication lag observer error: "+e)
			}
		}
		for _, e := range f.Errors {
			n = append(n, "feed error: "+e)
		}
	}
	if c := p.Checks; c != nil {
		n = append(n, fmt.Sprintf("checks: %d sampled, %d checked, %d at another tip, %d dropped (checker busy), %d mismatches",
			c.Sampled, c.Checked, c.SkippedTip, c.Dropped, c.Mismatches))
		for _, e := range c.Examples {
			n = append(n, "mismatch: "+e)
		}
	}
	return n
}

// missedConfigs are the configurations a missed target names.
func (r *Report) missedConfigs() map[string]bool {
	m := map[string]bool{}
	for _, v := range r.Targets {
		if v.Status == "MISS" && v.Config != "" {
			m[v.Config] = true
		}
	}
	return m
}

// Markdown renders the report for people.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# utxo-cache load test: %s scenario, %s\n\n", r.Scenario, r.Started.Format("2006-01-02 15:04:05 UTC"))
	if len(r.Command) > 0 {
		fmt.Fprintf(&b, "Command: `%s`\n\n", shellJoin(r.Command))
	}
	for _, l := range r.introLines() {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "\n**Run error:** %s\n", r.Error)
	}
	if w := r.busyWarning(); w != "" {
		fmt.Fprintf(&b, "\n**Warning:** %s\n", w)
	}
	if r.Soak == nil {
		fmt.Fprintf(&b, "\n## Headline\n\n%s", r.headlineTable().markdown())
	}
	fmt.Fprintf(&b, "\n## Targets\n\n%s\n", r.targetsTable().markdown())
	if r.Failed {
		fmt.Fprintf(&b, "**FAILED:** %s\n\n", strings.Join(r.FailReasons, "; "))
	}
	if r.Soak != nil {
		b.WriteString(r.Soak.markdown())
	}
	if r.Scale != nil {
		b.WriteString(r.Scale.markdown(r.Configs))
	}
	if len(r.Fairness.Comparable) > 0 {
		b.WriteString("## Comparability\n\n")
		for _, l := range r.Fairness.Comparable {
			fmt.Fprintf(&b, "- %s\n", l)
		}
		b.WriteString("\n")
	}
	if fr := r.Fanout; fr != nil {
		fmt.Fprintf(&b, "## Fan-out: what followers cost the writer\n\n%s\n", fanoutSummaryTable(fr).markdown())
		fmt.Fprintf(&b, "- Each leg: a writer on a fresh copy of the preloaded store (pinned to the service's CPUs when the run pins), "+
			"fed the same %d blocks and %d rollbacks at %.0f steps/s, and that many lightweight followers in the harness's process "+
			"(on the harness's CPUs, with nats-server), each reading every change (the change log over HTTP, or the JetStream stream "+
			"through a single nats-server, %s) and checking that it follows the one before; %d rounds of legs, every other one backwards.\n"+
			"- Apply time: the writer's own time to validate and commit each block (utxo_cache_writer_apply_seconds, read after each "+
			"acknowledgement); a leg's apply rate is 1000 / its median block's ms. Apply ratio: the median over the legs with none of their "+
			"apply p50, over the same median with the followers. Spread: (largest - smallest) / median of the legs' apply p50; for the legs "+
			"with none it is the measure's own noise, and a ratio closer to 1 than that tells nothing apart. Mean ratio: the same by blocks "+
			"over summed apply seconds.\n"+
			"- Writer (and nats-server) CPU and allocations per follower: the median over the legs with followers less the median over the "+
			"legs with none, per follower. Bytes per change: what a follower read, on average. Lag: acknowledgement of a write to a "+
			"follower having it; lag p99 (max) is the median (largest) of the legs' p99, pooled the p99 over every change of every leg at once.\n\n### Legs\n\n%s\n",
			fr.Blocks, fr.Rollbacks, fr.Rate, fr.NATSServer, fr.Rounds, fanoutTable(fr).markdown())
	}
	if tr := r.Throughput; tr != nil {
		fmt.Fprintf(&b, "## Writer apply throughput with and without replicas\n\n%s\n", throughputTable(tr).markdown())
		for _, l := range throughputNotes(tr) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
		b.WriteString("\n")
	}
	missed := r.missedConfigs()
	for i := range r.Configs {
		c := &r.Configs[i]
		fmt.Fprintf(&b, "## %s\n\n", c.Name)
		if len(c.Args) > 0 {
			fmt.Fprintf(&b, "`%s`\n\n", strings.Join(c.Args, " "))
		}
		if len(c.BodySizes) > 0 {
			fmt.Fprintf(&b, "Bare body sizes (bytes): %s\n\n", bodySizes(c.BodySizes))
		}
		if c.Error != "" {
			fmt.Fprintf(&b, "Error: %s\n\n", c.Error)
		}
		for _, p := range c.phases() {
			if p.Requests == 0 {
				continue
			}
			fmt.Fprintf(&b, "### %s phase\n\n%s\n", p.Name, endpointsTable(p).markdown())
			for _, l := range phaseNotes(p) {
				fmt.Fprintf(&b, "- %s\n", l)
			}
			b.WriteString("\n")
		}
		for _, p := range c.phases() {
			pr := p.Profile
			if pr == nil {
				continue
			}
			note := ""
			if missed[c.Name] {
				note = " (this configuration missed a target)"
			}
			fmt.Fprintf(&b, "### CPU profile of the %s phase%s\n\n%s", p.Name, note, pr.Path)
			if pr.Error != "" {
				fmt.Fprintf(&b, " (%s)", pr.Error)
			}
			if pr.Top != "" {
				fmt.Fprintf(&b, "\n\n```\n%s```\n", pr.Top)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// fanoutSummaryTable is the fanout scenario's medians by transport and
// follower count.
func fanoutSummaryTable(fr *FanoutResult) *table {
	t := &table{head: []string{"transport", "followers", "legs", "apply p50 ms (min–max)", "spread", "apply p99 ms",
		"apply ratio", "mean ratio", "writer CPU cores", "mcores per follower", "allocs per step", "allocs per follower-step",
		"nats-server CPU cores", "nats-server mcores per follower", "bytes per change", "lag p99 ms (max)", "lag p99 ms, pooled"}}
	for _, s := range fr.Summary {
		ratio, mean, per, perAlloc, perNATS, bytes := "-", "-", "-", "-", "-", "-"
		if s.Followers > 0 {
			ratio, mean = fmt.Sprintf("%.3f", s.ApplyRatio), fmt.Sprintf("%.3f", s.MeanApplyRatio)
			per, perAlloc = fmt.Sprintf("%.2f", s.MilliCoresPerFollower), fmt.Sprintf("%.1f", s.AllocsPerFollowerStep)
			perNATS, bytes = fmt.Sprintf("%.2f", s.NATSMilliCoresPerFollower), fmt.Sprintf("%.0f", s.ChangeBytes)
		}
		t.add(s.Transport, fmt.Sprint(s.Followers), fmt.Sprint(s.Legs),
			fmt.Sprintf("%.3f (%.3f–%.3f)", s.ApplyP50, s.ApplyP50Min, s.ApplyP50Max), fmt.Sprintf("%.3f", s.Spread), ms(s.ApplyP99),
			ratio, mean, fmt.Sprintf("%.3f", s.CPUCores), per, fmt.Sprintf("%.0f", s.AllocsPerStep), perAlloc,
			fmt.Sprintf("%.3f", s.NATSCores), perNATS, bytes, fmt.Sprintf("%.1f (%.1f)", s.LagP99, s.LagP99Max), ms(s.LagPooled.P99))
	}
	return t
}

// fanoutTable is the fanout scenario's legs, in the order they ran.
func fanoutTable(fr *FanoutResult) *table {
	t := &table{head: []string{"leg", "transport", "followers", "load average", "steps", "writer CPU cores", "nats-server CPU cores", "allocs per step",
		"apply p50 ms", "apply p99 ms", "apply blocks/s (p50)", "apply blocks/s (mean)", "lag p50 ms", "lag p99 ms", "lag max ms", "bad", "error"}}
	for i, l := range fr.Legs {
		cpu, natsCPU := "-", "-"
		if l.Writer != nil {
			cpu = fmt.Sprintf("%.3f", l.Writer.CPUCores)
		}
		if l.NATS != nil {
			natsCPU = fmt.Sprintf("%.3f", l.NATS.CPUCores)
		}
		t.add(fmt.Sprint(i+1), l.Transport, fmt.Sprint(l.Followers), l.LoadAvg, fmt.Sprint(l.Steps), cpu, natsCPU, fmt.Sprintf("%.0f", l.AllocsPerStep),
			fmt.Sprintf("%.3f", l.Apply.P50), ms(l.Apply.P99), fmt.Sprintf("%.1f", l.ApplyBlocksPerSec), fmt.Sprintf("%.1f", l.MeanApplyBlocksPerSec),
			ms(l.Lag.P50), ms(l.Lag.P99), ms(l.Lag.Max), fmt.Sprint(l.Bad), l.Error)
	}
	return t
}

// throughputTable is the replicas scenario's legs.
func throughputTable(tr *ThroughputResult) *table {
	t := &table{head: []string{"leg", "replicas", "blocks", "rollbacks", "writer apply s", "writer apply blocks/s", "posting s", "posted blocks/s",
		"POST p50 ms", "POST p99 ms", "writer CPU cores", "replicas caught up after s", "error"}}
	for i, l := range tr.Legs {
		cpu := "-"
		if l.Writer != nil {
			cpu = fmt.Sprintf("%.2f", l.Writer.CPUCores)
		}
		t.add(fmt.Sprint(i+1), fmt.Sprint(l.Replicas), fmt.Sprint(l.Blocks), fmt.Sprint(l.Rollbacks),
			fmt.Sprintf("%.2f", l.WriterApplySeconds), fmt.Sprintf("%.1f", l.ApplyBlocksPerSec), fmt.Sprintf("%.2f", l.Seconds),
			fmt.Sprintf("%.1f", l.BlocksPerSec), ms(l.Apply.P50), ms(l.Apply.P99), cpu, fmt.Sprintf("%.2f", l.CatchUpSeconds), l.Error)
	}
	return t
}

func throughputNotes(tr *ThroughputResult) []string {
	n := []string{fmt.Sprintf("without replicas %.1f blocks/s, with %d replicas %.1f blocks/s: ratio %.2f (target ≥ %.2f)",
		tr.Without, tr.Replicas, tr.With, tr.Ratio, replicaApplyShare),
		"Each leg: a writer on a fresh copy of the preloaded store (pinned to the service's CPUs when the run pins), its replicas " +
			"bootstrapped from its checkpoint (on the harness's CPUs), then the same script posted back to back, one write in flight. " +
			"Writer apply blocks/s, which the ratio compares, is the blocks the writer applied over the time it spent applying them " +
			"(utxo_cache_writer_apply_seconds: validate and commit); posted blocks/s is the blocks over the time from the first post to " +
			"the last acknowledgement, which also counts the harness's own time between posts, on CPUs it shares with the replicas. " +
			"Afterwards every replica must reach the writer's seq and report its tip, count and digest."}
	if len(tr.Legs) > 0 && len(tr.Legs[0].Processes) > 0 {
		n = append(n, "Logs: serve-throughput-<leg>-writer.log and serve-throughput-<leg>-replica-<i>.log.")
	}
	return n
}

func bodySizes(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func (r *Report) introLines() []string {
	m := r.Machine
	s := r.Settings
	p := r.Preload
	var ex []string
	for _, a := range sortedKeys(p.Exchanges) {
		ex = append(ex, fmt.Sprintf("%d", p.Exchanges[a]))
	}
	if tr := r.Throughput; tr != nil {
		return []string{
			fmt.Sprintf("machine: %d CPUs, %s/%s, %s, kernel %s; load average %s at the start, %s at the end; %s",
				m.CPUs, m.GOOS, m.GOARCH, m.GoVersion, m.Kernel, m.LoadAvgStart, m.LoadAvgEnd, r.Fairness.Placement.describe()),
			fmt.Sprintf("store: %d live UTXOs after %d blocks (height %d) via %s in %.1f s", p.UTXOs, p.Blocks, p.Height, p.Via, p.Seconds),
			fmt.Sprintf("replicas scenario: %d legs of the same %d blocks and %d rollbacks (%s profile, seed %d, %d txs per block), "+
				"without and with %d replicas", len(tr.Legs), tr.Blocks, tr.Rollbacks, s.Profile, s.Seed, s.TxsPerBlock, tr.Replicas),
			fmt.Sprintf("run took %.0f s; results in %s", r.Seconds, r.ResultsDir),
		}
	}
	// A run without a model of the chain (the scale scenario) knows no
	// exchange's UTXO count and has no feed and no checked answers.
	exchanges := "exchange addresses hold " + strings.Join(ex, ", ") + " UTXOs"
	if len(ex) == 0 {
		exchanges = "no model of the chain: the exchange addresses' UTXO counts are not known"
	}
	feed := fmt.Sprintf("writer feed in the rate phase: %.0f blocks/s, a rollback of %d blocks every %d blocks; %.1f%% of answers checked against the model",
		s.BlockRate, s.RollbackDepth, s.RollbackEvery, 100*s.CheckFraction)
	if s.BlockRate < 0 {
		feed = "no writer feed in the rate phase, and no answer checked against a model"
	}
	return []string{
		fmt.Sprintf("machine: %d CPUs, %s/%s, %s, kernel %s; load average %s at the start, %s at the end; %s",
			m.CPUs, m.GOOS, m.GOARCH, m.GoVersion, m.Kernel, m.LoadAvgStart, m.LoadAvgEnd, r.Fairness.Placement.describe()),
		fmt.Sprintf("store: %d live UTXOs after %d blocks (height %d) via %s in %.1f s; %d ordinary addresses; %s",
			p.UTXOs, p.Blocks, p.Height, p.Via, p.Seconds, p.Addresses, exchanges),
		fmt.Sprintf("workload: %s profile, seed %d, %d txs per block; mix %s; pages of %d, lookups of %d, deep walks up to %d pages",
			s.Profile, s.Seed, s.TxsPerBlock, s.Mix, s.PageLimit, s.LookupBatch, s.MaxDepth),
		fmt.Sprintf("phases: machine warm-up %s before the first configuration; per configuration warmup %s, max %s (closed loop, %d workers), rate %s (open loop at %.0f%% of max, ≤ %d in flight); request timeout %s",
			s.MachineWarmup, s.Warmup, s.MaxDuration, s.Workers, s.RateDuration, 100*s.RateFraction, s.InFlight, s.RequestTimeout),
		feed,
		fmt.Sprintf("run took %.0f s; results in %s", r.Seconds, r.ResultsDir),
	}
}

// HTML renders a self-contained page: the tables and inline SVG charts.
func (r *Report) HTML() string {
	var b strings.Builder
	title := fmt.Sprintf("utxo-cache load test: %s scenario, %s", r.Scenario, r.Started.Format("2006-01-02 15:04 UTC"))
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.EscapeString(title) + "</title>\n<style>\n" +
		"body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}\n" +
		"table{border-collapse:collapse;margin:0.5em 0 1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}\n" +
		"th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.pass{background:#d9f2d9}.miss{background:#f7d4d4}\n" +
		"pre{background:#f7f7f7;padding:8px;font-size:12px;overflow-x:auto}svg{margin:0.5em 1em 0.5em 0}.notes{font-size:13px}\n" +
		"</style></head><body>\n")
	b.WriteString("<h1>" + html.EscapeString(title) + "</h1>\n")
	if len(r.Command) > 0 {
		b.WriteString("<p><code>" + html.EscapeString(strings.Join(r.Command, " ")) + "</code></p>\n")
	}
	b.WriteString("<ul class=\"notes\">")
	for _, l := range r.introLines() {
		b.WriteString("<li>" + html.EscapeString(l) + "</li>")
	}
	b.WriteString("</ul>\n")
	if r.Error != "" {
		b.WriteString("<p class=\"miss\">Run error: " + html.EscapeString(r.Error) + "</p>\n")
	}
	if w := r.busyWarning(); w != "" {
		b.WriteString("<p class=\"miss\">Warning: " + html.EscapeString(w) + "</p>\n")
	}
	if r.Soak == nil {
		b.WriteString("<h2>Headline</h2>\n" + r.headlineTable().html())
		b.WriteString(r.throughputChart())
		b.WriteString(r.hitRatioChart())
	}
	b.WriteString("<h2>Targets</h2>\n" + r.targetsTable().html())
	if r.Failed {
		b.WriteString("<p class=\"miss\">FAILED: " + html.EscapeString(strings.Join(r.FailReasons, "; ")) + "</p>\n")
	}
	if r.Soak != nil {
		b.WriteString(r.Soak.html())
	}
	if len(r.Fairness.Comparable) > 0 {
		b.WriteString("<h2>Comparability</h2>\n<ul class=\"notes\">")
		for _, l := range r.Fairness.Comparable {
			b.WriteString("<li>" + html.EscapeString(l) + "</li>")
		}
		b.WriteString("</ul>\n")
	}
	if tr := r.Throughput; tr != nil {
		b.WriteString("<h2>Writer apply throughput with and without replicas</h2>\n" + throughputTable(tr).html() + "<ul class=\"notes\">")
		for _, l := range throughputNotes(tr) {
			b.WriteString("<li>" + html.EscapeString(l) + "</li>")
		}
		b.WriteString("</ul>\n")
	}
	missed := r.missedConfigs()
	for i := range r.Configs {
		c := &r.Configs[i]
		b.WriteString("<h2>" + html.EscapeString(c.Name) + "</h2>\n")
		if len(c.Args) > 0 {
			b.WriteString("<p><code>" + html.EscapeString(strings.Join(c.Args, " ")) + "</code></p>\n")
		}
		if len(c.BodySizes) > 0 {
			b.WriteString("<p class=\"notes\">Bare body sizes (bytes): " + html.EscapeString(bodySizes(c.BodySizes)) + "</p>\n")
		}
		b.WriteString(timelineCharts(c))
		for _, p := range c.phases() {
			if p.Requests == 0 {
				continue
			}
			b.WriteString("<h3>" + html.EscapeString(p.Name) + " phase</h3>\n" + endpointsTable(p).html() + "<ul class=\"notes\">")
			for _, l := range phaseNotes(p) {
				b.WriteString("<li>" + html.EscapeString(l) + "</li>")
			}
			b.WriteString("</ul>\n")
		}
		for _, p := range c.phases() {
			if pr := p.Profile; pr != nil && pr.Top != "" {
				open := ""
				if missed[c.Name] {
					open = " open"
				}
				b.WriteString("<details" + open + "><summary>CPU profile of the " + html.EscapeString(p.Name) + " phase (" +
					html.EscapeString(pr.Path) + ")</summary><pre>" + html.EscapeString(pr.Top) + "</pre></details>\n")
			}
		}
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// Charts: small hand-written SVG, so the page needs nothing but a browser.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"}

type series struct {
	name   string
	xs, ys []float64
}

const (
	chartW, chartH             = 520.0, 220.0
	padL, padR, padT, padB     = 56.0, 10.0, 28.0, 36.0
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	legendStep                 = 110.0
	markerDash                 = "4,3"
	barGroupGap, barInnerShare = 0.25, 1.0
)

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func svgOpen(b *strings.Builder, title, ylabel string, ymax float64) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-size="11" font-family="sans-serif">`, chartW, chartH)
	fmt.Fprintf(b, `<text x="%.0f" y="14" font-size="13" font-weight="bold">%s</text>`, padL, html.EscapeString(title))
	fmt.Fprintf(b, `<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">%s</text>`,
		padT+plotH/2, padT+plotH/2, html.EscapeString(ylabel))
	for i := 0; i <= 4; i++ {
		y := padT + plotH - plotH*float64(i)/4
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, padL, padL+plotW, y, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, tickLabel(ymax*float64(i)/4))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
}

func tickLabel(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func legend(b *strings.Builder, names []string) {
	for i, n := range names {
		x := padL + float64(i)*legendStep
		y := chartH - 8
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>`, x, y-9, palette[i%len(palette)])
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`, x+14, y, html.EscapeString(n))
	}
}

// lineChart plots series over a shared x range, with dashed vertical
// markers (phase boundaries) at marks.
func lineChart(title, ylabel, xlabel string, ss []series, marks []float64) string {
	var xmax, ymax float64
	for _, s := range ss {
		for i := range s.xs {
			xmax = max(xmax, s.xs[i])
			ymax = max(ymax, s.ys[i])
		}
	}
	xmax = max(xmax, 1)
	ymax = niceMax(ymax)
	var b strings.Builder
	svgOpen(&b, title, ylabel, ymax)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, padL+plotW, padT+plotH+14, html.EscapeString(xlabel))
	for _, m := range marks {
		x := padL + plotW*m/xmax
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="%s"/>`, x, x, padT, padT+plotH, markerDash)
	}
	var names []string
	for i, s := range ss {
		names = append(names, s.name)
		var pts []string
		for j := range s.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", padL+plotW*s.xs[j]/xmax, padT+plotH-plotH*min(s.ys[j], ymax)/ymax))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, palette[i%len(palette)], strings.Join(pts, " "))
	}
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}

// barChart draws one group of bars per label, one bar per series, and an
// optional dashed horizontal reference line.
func barChart(title, ylabel string, labels []string, ss []series, ref float64, refName string) string {
	ymax := ref
	for _, s := range ss {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	ymax = niceMax(ymax)
	var b strings.Builder
	svgOpen(&b, title, ylabel, ymax)
	groupW := plotW / float64(max(len(labels), 1))
	barW := groupW * (1 - barGroupGap) / float64(max(len(ss), 1)) * barInnerShare
	for g, label := range labels {
		x0 := padL + groupW*float64(g) + groupW*barGroupGap/2
		for i, s := range ss {
			if g >= len(s.ys) {
				continue
			}
			h := plotH * s.ys[g] / ymax
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.3g</title></rect>`,
				x0+barW*float64(i), padT+plotH-h, barW, h, palette[i%len(palette)], html.EscapeString(label), html.EscapeString(s.name), s.ys[g])
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, padL+groupW*(float64(g)+0.5), padT+plotH+14, html.EscapeString(label))
	}
	if ref > 0 {
		y := padT + plotH - plotH*ref/ymax
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="%s"/>`, padL, padL+plotW, y, y, markerDash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, padL+plotW-2, y-3, html.EscapeString(refName))
	}
	var names []string
	for _, s := range ss {
		names = append(names, s.name)
	}
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}

func (r *Report) throughputChart() string {
	var labels []string
	maxS := series{name: "max req/s"}
	rateS := series{name: "rate req/s"}
	hotS := series{name: "hot req/s"}
	ceiling := 0.0
	for _, c := range r.Configs {
		labels = append(labels, c.Name)
		maxS.ys = append(maxS.ys, c.Max.AchievedRate)
		rateS.ys = append(rateS.ys, c.Rate.AchievedRate)
		hot := 0.0
		if c.Hot != nil {
			hot = c.Hot.AchievedRate
		}
		hotS.ys = append(hotS.ys, hot)
		if c.Name == ConfigBare {
			ceiling = c.Max.AchievedRate
		}
	}
	return barChart("Throughput per configuration", "requests/s", labels, []series{maxS, rateS, hotS}, ceiling, "bare ceiling (max)")
}

func (r *Report) hitRatioChart() string {
	tiers := map[string]bool{}
	var labels []string
	for _, c := range r.Configs {
		if c.Max.Cache == nil {
			continue
		}
		labels = append(labels, c.Name)
		for t := range c.Max.Cache.Tiers {
			tiers[t] = true
		}
	}
	if len(tiers) == 0 {
		return ""
	}
	names := sortedKeys(tiers)
	sort.Strings(names)
	var ss []series
	for _, t := range names {
		for _, phase := range []string{"max", "rate"} {
			s := series{name: t + " (" + phase + ")"}
			for _, c := range r.Configs {
				if c.Max.Cache == nil {
					continue
				}
				p := &c.Max
				if phase == "rate" {
					p = &c.Rate
				}
				v := 0.0
				if p.Cache != nil {
					v = p.Cache.Tiers[t].HitRatio
				}
				s.ys = append(s.ys, v)
			}
			ss = append(ss, s)
		}
	}
	return barChart("Cache hit ratio per tier", "hit ratio", labels, ss, 0, "")
}

// timelineCharts plots a configuration's max and rate phases back to back:
// latency percentiles and throughput per second.
func timelineCharts(c *ConfigResult) string {
	p50 := series{name: "p50"}
	p99 := series{name: "p99"}
	mx := series{name: "max"}
	rps := series{name: "requests/s"}
	var marks []float64
	offset := 0.0
	for _, p := range c.phases() {
		for _, tp := range p.Timeline {
			x := offset + float64(tp.Second)
			p50.xs, p50.ys = append(p50.xs, x), append(p50.ys, tp.P50)
			p99.xs, p99.ys = append(p99.xs, x), append(p99.ys, tp.P99)
			mx.xs, mx.ys = append(mx.xs, x), append(mx.ys, tp.Max)
			rps.xs, rps.ys = append(rps.xs, x), append(rps.ys, float64(tp.Requests))
		}
		offset += float64(len(p.Timeline))
		marks = append(marks, offset)
	}
	if len(p50.xs) == 0 {
		return ""
	}
	marks = marks[:len(marks)-1]
	phases := "max | rate"
	if c.Hot != nil {
		phases += " | hot"
	}
	return lineChart(c.Name+": latency per second ("+phases+")", "ms", "seconds", []series{p50, p99, mx}, marks) +
		lineChart(c.Name+": throughput per second ("+phases+")", "requests", "seconds", []series{rps}, marks)
}

// shellJoin joins a command's arguments as a shell would need them typed:
// an argument with a space, a quote or nothing in it is single-quoted.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
