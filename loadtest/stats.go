package loadtest

import (
	"errors"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 µs to 60 s with 3
// significant digits (0.1% error); timeline histograms use 2 digits, which
// is plenty for a chart and a tenth of the memory.
const (
	histLowest  = 1
	histHighest = 60_000_000
	histDigits  = 3
	lineDigits  = 2
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histLowest, histHighest, histDigits) }

// recordLatency records d, clamped into the histogram's range.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	_ = h.RecordValue(min(max(us, histLowest), histHighest))
}

// LatencySummary is a latency distribution in milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) LatencySummary {
	if h == nil || h.TotalCount() == 0 {
		return LatencySummary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// syncHist is a histogram that many goroutines record into (the feed's,
// visibility's): low rates, so one mutex is fine.
type syncHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram // guarded by mu
}

func newSyncHist() *syncHist { return &syncHist{h: newHist()} }

func (s *syncHist) record(d time.Duration) {
	s.mu.Lock()
	recordLatency(s.h, d)
	s.mu.Unlock()
}

func (s *syncHist) summary() LatencySummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return summarize(s.h)
}

// recorder collects the results of one phase's requests. Workers record into
// one of a few shards (worker % shards), each behind its own mutex: the
// histograms are not safe for concurrent use, and one per worker would cost
// megabytes per worker for an open loop's large pool.
type recorder struct {
	start  time.Time
	shards []recShard
}

const recShards = 8

type recShard struct {
	mu       sync.Mutex
	kinds    [numKinds]*hdrhistogram.Histogram // guarded by mu
	all      *hdrhistogram.Histogram           // guarded by mu
	lag      *hdrhistogram.Histogram           // guarded by mu: actual send - intended (open loop)
	timeline []*hdrhistogram.Histogram         // guarded by mu: per second of intended time
	status   [numKinds]map[int]int64           // guarded by mu
	errors   map[string]int64                  // guarded by mu: by class
}

func newRecorder(start time.Time) *recorder {
	r := &recorder{start: start, shards: make([]recShard, recShards)}
	for i := range r.shards {
		s := &r.shards[i]
		for k := range s.kinds {
			s.kinds[k] = newHist()
			s.status[k] = map[int]int64{}
		}
		s.all, s.lag = newHist(), newHist()
		s.errors = map[string]int64{}
	}
	return r
}

// outcome is one finished request.
type outcome struct {
	kind     kind
	status   int    // HTTP status; 0 when no response
	errClass string // "" for a success (2xx, 304)
	intended time.Time
	sent     time.Time
	latency  time.Duration
}

func (r *recorder) record(worker int, o outcome) {
	s := &r.shards[worker%len(r.shards)]
	sec := int(o.intended.Sub(r.start) / time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	recordLatency(s.kinds[o.kind], o.latency)
	recordLatency(s.all, o.latency)
	if lag := o.sent.Sub(o.intended); lag > 0 {
		recordLatency(s.lag, lag)
	} else {
		recordLatency(s.lag, 0)
	}
	if sec >= 0 {
		for len(s.timeline) <= sec {
			s.timeline = append(s.timeline, hdrhistogram.New(histLowest, histHighest, lineDigits))
		}
		recordLatency(s.timeline[sec], o.latency)
	}
	if o.status != 0 {
		s.status[o.kind][o.status]++
	}
	if o.errClass != "" {
		s.errors[o.errClass]++
	}
}

// EndpointResult is one request kind's figures in a phase.
type EndpointResult struct {
	Latency LatencySummary   `json:"latency"`
	Status  map[string]int64 `json:"status"` // by HTTP status code
}

// TimePoint is one second of a phase.
type TimePoint struct {
	Second   int     `json:"second"`
	Requests int64   `json:"requests"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
}

// merged is a recorder's shards combined.
type merged struct {
	all, lag  *hdrhistogram.Histogram
	endpoints map[string]EndpointResult
	errors    map[string]int64
	timeline  []TimePoint
	ok        int64 // 2xx and 304 answers
}

func (r *recorder) merge() merged {
	m := merged{all: newHist(), lag: newHist(), endpoints: map[string]EndpointResult{}, errors: map[string]int64{}}
	var kinds [numKinds]*hdrhistogram.Histogram
	var status [numKinds]map[int]int64
	var line []*hdrhistogram.Histogram
	for k := range kinds {
		kinds[k], status[k] = newHist(), map[int]int64{}
	}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		m.all.Merge(s.all)
		m.lag.Merge(s.lag)
		for k := range kinds {
			kinds[k].Merge(s.kinds[k])
			for code, n := range s.status[k] {
				status[k][code] += n
			}
		}
		for sec, h := range s.timeline {
			for len(line) <= sec {
				line = append(line, hdrhistogram.New(histLowest, histHighest, lineDigits))
			}
			line[sec].Merge(h)
		}
		for c, n := range s.errors {
			m.errors[c] += n
		}
		s.mu.Unlock()
	}
	for k := range kinds {
		if kinds[k].TotalCount() == 0 {
			continue
		}
		er := EndpointResult{Latency: summarize(kinds[k]), Status: map[string]int64{}}
		for code, n := range status[k] {
			er.Status[strconv.Itoa(code)] = n
			if code/100 == 2 || code == 304 {
				m.ok += n
			}
		}
		m.endpoints[kind(k).String()] = er
	}
	for sec, h := range line {
		ls := summarize(h)
		m.timeline = append(m.timeline, TimePoint{Second: sec, Requests: ls.Count, P50: ls.P50, P99: ls.P99, Max: ls.Max})
	}
	return m
}

// classify names the error class of a request: "" for success, "connect",
// "timeout" or "transport" for a failure without an answer, "4xx:<code>" and
// "5xx:<code>" for error statuses (the driver forgives an outpoint's 404).
func classify(err error, status int) string {
	if err != nil {
		var ne net.Error
		var ue *url.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
			errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EADDRNOTAVAIL):
			return "connect"
		case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
			return "timeout"
		case errors.As(err, &ue) && ue.Op == "dial":
			return "connect"
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return "connect"
		}
		return "transport"
	}
	switch {
	case status/100 == 2, status == 304:
		return ""
	case status/100 == 4:
		return "4xx:" + strconv.Itoa(status)
	case status/100 == 5:
		return "5xx:" + strconv.Itoa(status)
	}
	return "status:" + strconv.Itoa(status)
}

// count5xx sums the 5xx classes of an error map.
func count5xx(errs map[string]int64) int64 {
	var n int64
	for c, v := range errs {
		if len(c) > 4 && c[:4] == "5xx:" {
			n += v
		}
	}
	return n
}

// sortedKeys returns m's keys in order (for reports).
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
