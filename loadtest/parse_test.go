package loadtest

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		url    string
		remote bool // allowRemote
		ok     bool
		isRem  bool // fails with ErrRemoteTarget
	}{
		{"http://127.0.0.1:8080", false, true, false},
		{"http://127.8.9.10:8080/", false, true, false},
		{"http://localhost:8080", false, true, false},
		{"http://LOCALHOST.:8080", false, true, false},
		{"http://[::1]:8080", false, true, false},
		{"https://[::ffff:127.0.0.1]:8443", false, true, false},
		{"http://127.0.0.1:8080/prefix/", false, true, false},
		{"http://10.0.0.1:8080", false, false, true},
		{"http://128.0.0.1", false, false, true},
		{"http://[::2]:8080", false, false, true},
		{"http://[fe80::1%25lo]:8080", false, false, true},
		{"http://localhost.example.com", false, false, true},
		{"http://my-laptop:8080", false, false, true}, // names are not resolved
		{"http://0.0.0.0:8080", false, false, true},
		{"http://10.0.0.1:8080", true, true, false},
		{"http://api.example.com", true, true, false},
		{"ftp://127.0.0.1", false, false, false},
		{"127.0.0.1:8080", false, false, false},
		{"http://user:pw@127.0.0.1", false, false, false},
		{"http://127.0.0.1:8080/?x=1", false, false, false},
		{"http://", false, false, false},
	} {
		u, err := CheckTarget(tc.url, tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("CheckTarget(%q, %v) = %v, %v; want ok = %v", tc.url, tc.remote, u, err, tc.ok)
			continue
		}
		if got := errors.Is(err, ErrRemoteTarget); got != tc.isRem {
			t.Errorf("CheckTarget(%q): %v; want ErrRemoteTarget = %v", tc.url, err, tc.isRem)
		}
		if err == nil && strings.HasSuffix(u.String(), "/") {
			t.Errorf("CheckTarget(%q) = %s: keeps a trailing slash", tc.url, u)
		}
	}
}

const exposition = `# HELP utxo_cache_tier_lookups_total Cache lookups by tier and result (hit, miss).
# TYPE utxo_cache_tier_lookups_total counter
utxo_cache_tier_lookups_total{result="hit",tier="memory"} 900
utxo_cache_tier_lookups_total{result="miss",tier="memory"} 100
utxo_cache_tier_lookups_total{tier="redis",result="hit"} 60
utxo_cache_tier_lookups_total{tier="redis", result="miss"} 40 1700000000000
utxo_cache_disk_reads_total 140
odd_label{path="a \"quoted\" \\ back\nslash",code="200"} 1.5e3
http_seconds_bucket{le="+Inf"} 7
gauge_nan NaN
gauge_inf -Inf

`

func TestParseMetrics(t *testing.T) {
	ss, err := ParseMetrics(exposition)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 9 {
		t.Fatalf("%d samples, want 9: %+v", len(ss), ss)
	}
	if got := ss.Sum(metricTierLookups, map[string]string{"tier": "memory"}); got != 1000 {
		t.Errorf("memory lookups %v, want 1000", got)
	}
	if got := ss.Sum(metricTierLookups, map[string]string{"result": "hit"}); got != 960 {
		t.Errorf("hits %v, want 960", got)
	}
	if got := ss.Sum("odd_label", map[string]string{"path": "a \"quoted\" \\ back\nslash"}); got != 1500 {
		t.Errorf("escaped label: %v, want 1500", got)
	}
	if got := ss.Sum("http_seconds_bucket", map[string]string{"le": "+Inf"}); got != 7 {
		t.Errorf("bucket %v", got)
	}
	if v := ss.Sum("gauge_nan", nil); !math.IsNaN(v) {
		t.Errorf("NaN parsed as %v", v)
	}
	if v := ss.Sum("gauge_inf", nil); !math.IsInf(v, -1) {
		t.Errorf("-Inf parsed as %v", v)
	}
	if got := ss.LabelValues(metricTierLookups, "tier"); strings.Join(got, ",") != "memory,redis" {
		t.Errorf("tiers %v", got)
	}

	before, _ := ParseMetrics("utxo_cache_tier_lookups_total{tier=\"memory\",result=\"hit\"} 400\nutxo_cache_disk_reads_total 40\n")
	d := tierDelta(before, ss)
	if m := d.Tiers["memory"]; m.Hits != 500 || m.Misses != 100 || math.Abs(m.HitRatio-500.0/600) > 1e-9 {
		t.Errorf("memory delta %+v", m)
	}
	if r := d.Tiers["redis"]; r.Hits != 60 || r.HitRatio != 0.6 {
		t.Errorf("redis delta %+v", r)
	}
	if d.DiskReads != 100 {
		t.Errorf("disk reads %v, want 100", d.DiskReads)
	}

	for _, bad := range []string{
		"novalue",
		`m{a="x"`,
		`m{a=x} 1`,
		`m{a="x} 1`,
		`m{a="\q"} 1`,
		"m 1 2 3",
		"m abc",
	} {
		if _, err := ParseMetrics(bad); !errors.Is(err, ErrBadExposition) {
			t.Errorf("ParseMetrics(%q) = %v, want ErrBadExposition", bad, err)
		}
	}
}

func TestParseProc(t *testing.T) {
	// The command field may hold spaces and parentheses.
	stat := []byte("4242 (we(ird) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 1000000 2000 18446744073709551615\n")
	cpu, err := parseProcStat(stat)
	if err != nil || cpu != 3250*time.Millisecond {
		t.Fatalf("parseProcStat = %v, %v; want 3.25s (325 ticks)", cpu, err)
	}
	if _, err := parseProcStat([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short stat line accepted")
	}
	status := []byte("Name:\tutxo-cache\nVmPeak:\t  900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n")
	rss, hwm, err := parseProcStatus(status)
	if err != nil || rss != 100<<20 || hwm != 200<<20 {
		t.Fatalf("parseProcStatus = %d, %d, %v", rss, hwm, err)
	}
	if _, _, err := parseProcStatus([]byte("Name: x\n")); err == nil {
		t.Error("status without VmRSS accepted")
	}
}

func TestParseMix(t *testing.T) {
	m, err := ParseMix(DefaultMix.String())
	if err != nil || m != DefaultMix {
		t.Fatalf("round trip: %v, %v", m, err)
	}
	m, err = ParseMix(" page = 3 , lookup=1")
	if err != nil || m[kindPage] != 3 || m[kindLookup] != 1 || m[kindTip] != 0 {
		t.Fatalf("ParseMix = %v, %v", m, err)
	}
	for _, bad := range []string{"", "page", "page=-1", "nope=1", "page=0"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
}

func TestPageEnd(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tipHash := strings.Repeat("01", 32)
	h := http.Header{}
	h.Set("X-Tip-Height", "77")
	h.Set("X-Tip-Hash", tipHash)
	body := `{"tip":{"height":77,"hash":"` + tipHash + `"},"address":"a","utxos":[{"tx_hash":"` + strings.Repeat("cd", 32) +
		`","index":0,"address":"a","value":"1","assets":[],"height":1},{"tx_hash":"` + hash +
		`","index":12,"address":"a","value":"2","assets":[],"height":2}],"next_cursor":"CUR-sor_1"}`
	cursor, end, ok := pageEnd([]byte(body), h)
	if !ok || cursor != "CUR-sor_1" || end == nil {
		t.Fatalf("pageEnd = %q, %v, %v", cursor, end, ok)
	}
	wantHash, _ := chain.ParseHash(hash)
	wantTip, _ := chain.ParseHash(tipHash)
	if end.last != (chain.OutPoint{TxHash: wantHash, Index: 12}) || end.tip != (chain.Tip{Height: 77, Hash: wantTip}) {
		t.Fatalf("end = %+v", end)
	}
	if _, _, ok := pageEnd([]byte(`{"utxos":[],"next_cursor":null}`), h); ok {
		t.Error("null cursor reported as a next page")
	}
}
