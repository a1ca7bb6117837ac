package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are per-route latency histograms and status counters.
type httpMetrics struct {
	seconds *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	if reg == nil {
		return nil
	}
	m := &httpMetrics{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "utxo_cache_http_request_seconds",
		Help:    "HTTP request latency by route and status code.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 12), // 50µs .. ~1.2s
	}, []string{"route", "code"})}
	reg.MustRegister(m.seconds)
	return m
}

// route returns the observer of one route; the common statuses' observers
// are resolved once so the hot path does no label lookup.
func (m *httpMetrics) route(path string) func(status int, d time.Duration) {
	if m == nil {
		return func(int, time.Duration) {}
	}
	common := map[int]prometheus.Observer{}
	for _, s := range []int{200, 304, 400, 404} {
		common[s] = m.seconds.WithLabelValues(path, strconv.Itoa(s))
	}
	return func(status int, d time.Duration) {
		o, ok := common[status]
		if !ok {
			o = m.seconds.WithLabelValues(path, strconv.Itoa(status))
		}
		o.Observe(d.Seconds())
	}
}
