package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/api/esplora"
	"github.com/utxo-cache/utxo-cache/blockfrost"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// TestBlockfrostInvalidAddressNotCached: a Shelley-looking address that
// does not decode answers 400 with ParseSubject's message every time, with
// the memory tier on (its listing is looked up in the tiers before the
// address is decoded, and a failed read is never cached); with a unit as
// well, the address is still what the answer names.
func TestBlockfrostInvalidAddressNotCached(t *testing.T) {
	s := newStack(t, stackConfig{noSpec: true, hot: -1, blockfrost: &blockfrost.Options{}})
	raw := append([]byte{0x01}, bytes.Repeat([]byte{0x11}, 56)...)
	good := textenc.Bech32("addr", textenc.ConvertBits(raw), textenc.Bech32Const)
	s.apply(tx("bfbad", nil, out(good, 7)))
	// The last character changed: the checksum fails.
	bad := good[:len(good)-1] + map[bool]string{true: "q", false: "p"}[good[len(good)-1] != 'q']
	_, perr := blockfrost.ParseSubject(bad)
	if perr == nil {
		t.Fatalf("%s decodes", bad)
	}
	for i := range 3 {
		for _, target := range []string{"/api/v0/addresses/" + bad + "/utxos", "/api/v0/addresses/" + bad + "/utxos/zz"} {
			r := s.get(target)
			var e struct {
				StatusCode int    `json:"status_code"`
				Message    string `json:"message"`
			}
			if r.code != 400 || json.Unmarshal(r.body, &e) != nil || e.StatusCode != 400 || !strings.Contains(e.Message, perr.Error()) {
				t.Fatalf("read %d of %s: %s (want 400 with %q)", i, target, r, perr)
			}
		}
		if r := s.get("/api/v0/addresses/" + good + "/utxos"); r.code != 200 || !strings.Contains(string(r.body), `"quantity":"7"`) {
			t.Fatalf("read %d of the valid address: %s", i, r)
		}
		s.mem.Wait()
	}
}

// TestFrontEndHitAllocs: a front end's answer from the memory tier costs
// the handler no more allocations than the /v1 answer of the same outputs
// (one more for the Esplora page, whose next cursor is a header of its
// own), measured with the response writer reused as a server's connection
// is, so the figures are the handler's.
//
// Not parallel: AllocsPerRun counts every goroutine's allocations.
func TestFrontEndHitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures are meaningless under -race")
	}
	allocs := func(s *stack, target string) float64 {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, target, nil)
		s.h.ServeHTTP(httptest.NewRecorder(), req) // fill
		s.mem.Wait()
		w := &connWriter{}
		serve := func() {
			w.reset()
			s.h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				t.Fatalf("%s: %d %s", target, w.status, w.body)
			}
		}
		serve() // fill the pools
		return testing.AllocsPerRun(200, serve)
	}

	es := newStack(t, stackConfig{noSpec: true, hot: -1, esplora: &esplora.Options{}})
	var txs []chain.Tx
	for i := range 3 {
		var outs []chain.Output
		for j := range 100 {
			outs = append(outs, out(espA, uint64(1000*i+j+1)))
		}
		txs = append(txs, tx(fmt.Sprintf("alloc-%d", i), nil, outs...))
	}
	es.apply(txs...)
	raw := append([]byte{0x01}, bytes.Repeat([]byte{0x11}, 56)...)
	addr := textenc.Bech32("addr", textenc.ConvertBits(raw), textenc.Bech32Const)
	bf := newStack(t, stackConfig{noSpec: true, hot: -1, blockfrost: &blockfrost.Options{}})
	outs := make([]chain.Output, 100)
	for i := range outs {
		outs[i] = out(addr, uint64(1000+i))
	}
	bf.apply(tx("alloc-bf", nil, outs...))

	for _, c := range []struct {
		name      string
		s         *stack
		v1, front string
		extra     float64
	}{
		{"esplora listing", es, "/v1/addresses/" + espA + "/utxos?limit=1000", "/api/address/" + espA + "/utxo", 0},
		{"esplora page", es, "/v1/addresses/" + espA + "/utxos?limit=100", "/api/address/" + espA + "/utxo?limit=100", 1},
		{"blockfrost page", bf, "/v1/addresses/" + addr + "/utxos?limit=100", "/api/v0/addresses/" + addr + "/utxos", 0},
	} {
		v1, front := allocs(c.s, c.v1), allocs(c.s, c.front)
		t.Logf("%s: %.1f allocations per request, /v1 %.1f", c.name, front, v1)
		if front > v1+c.extra {
			t.Errorf("%s: %.1f allocations per request, /v1's answer %.1f: want at most %.0f", c.name, front, v1, v1+c.extra)
		}
	}
}

// TestFrontRequestsConcurrent: concurrent Esplora reads of different
// addresses and pages, through the pooled per-request state, each answer
// exactly the one the same request answers alone (no request reads
// another's path or query).
func TestFrontRequestsConcurrent(t *testing.T) {
	s := newStack(t, stackConfig{noSpec: true, hot: -1, esplora: &esplora.Options{}})
	s.apply(tx("conc", nil, out(espA, 1), out(espA, 2), out(espA, 3), out(espB, 4), out(espB, 5)))
	targets := []string{
		"/api/address/" + espA + "/utxo",
		"/api/address/" + espB + "/utxo",
		"/api/address/" + espA + "/utxo?limit=1",
		"/api/address/" + espB + "/utxo?limit=2",
	}
	type answer struct {
		body, cursor string
	}
	serve := func(target string) answer {
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return answer{rec.Body.String(), rec.Header().Get("X-Next-Cursor")}
	}
	want := make([]answer, len(targets))
	for i, target := range targets {
		if want[i] = serve(target); !strings.HasPrefix(want[i].body, "[") {
			t.Fatalf("%s: %q", target, want[i].body)
		}
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for n := range 200 {
				i := (g + n) % len(targets)
				if got := serve(targets[i]); got != want[i] {
					errs <- fmt.Errorf("%s: %+v, alone %+v", targets[i], got, want[i])
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestProjectIDHeaderCanonical: the Blockfrost routes read project_id under
// the key net/http stores it by (Header.Get's lookup, without its
// canonicalizing on every request).
func TestProjectIDHeaderCanonical(t *testing.T) {
	if want := textproto.CanonicalMIMEHeaderKey("project_id"); api.ProjectIDHeader != want {
		t.Fatalf("project_id read under %q, stored under %q", api.ProjectIDHeader, want)
	}
}
