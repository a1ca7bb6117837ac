package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/utxo-cache/utxo-cache/loadtest/pgref"
	"github.com/utxo-cache/utxo-cache/node"
)

// The reference comparison of the scale scenario: the same reads against
// the imported store (disk only: memory tier off, a serve of its own) and
// against the PostgreSQL reference (pgref: one table of live UTXOs, a
// covering index on (address, chain order)) loaded from the same chain
// file, served by a utxo-loadtest subprocess through the service's Gin
// layer (bare.NewReadsHandler) and HTTP server settings. Each read kind
// (balance, first page of PageLimit items, outpoint) runs alone, closed
// loop with Workers connections and random keys from the readers' pools,
// for ReferenceDuration on one side and then the other, and the rounds
// repeat the whole sequence (ReferenceRounds), so that a shared machine's
// drift shows in both sides alike. Each side's figure is the median of its
// rounds.

// DefaultReferenceDSN is the reference's database unless told otherwise
// (Options.ReferenceDSN): the local server's database test.
const DefaultReferenceDSN = pgref.DefaultDSN

// referenceConns is the reference's connection pool: as many PostgreSQL
// backends as the load's connections could use at once, at most.
const referenceConns = 16

// referenceKinds are the reads compared, with the targets' names.
var referenceKinds = []kind{kindBalance, kindPage, kindOutpoint}

// referenceOverDisk is the target: cold reads at least this many times
// the reference's requests/s, for each read.
const referenceOverDisk = 3.0

// ReferenceResult is the reference comparison of a scale run.
type ReferenceResult struct {
	Schema       string          `json:"schema"` // dropped at the end of the run
	Load         pgref.LoadStats `json:"load"`
	Rounds       int             `json:"rounds"`
	PhaseSeconds float64         `json:"phase_seconds"`
	Workers      int             `json:"workers"`
	Conns        int             `json:"reference_conns"`
	Reads        []ReferenceRead `json:"reads"`
	Error        string          `json:"error,omitempty"`
}

// ReferenceRead is one read kind on both sides: each round's requests/s
// and p99 (ms), and the medians.
type ReferenceRead struct {
	Kind       string    `json:"kind"`
	DiskRPS    []float64 `json:"disk_rps"`
	RefRPS     []float64 `json:"reference_rps"`
	DiskP99    []float64 `json:"disk_p99_ms"`
	RefP99     []float64 `json:"reference_p99_ms"`
	DiskErrors int64     `json:"disk_errors"`
	RefErrors  int64     `json:"reference_errors"`

	DiskMedianRPS float64 `json:"disk_median_rps"`
	RefMedianRPS  float64 `json:"reference_median_rps"`
	DiskMedianP99 float64 `json:"disk_median_p99_ms"`
	RefMedianP99  float64 `json:"reference_median_p99_ms"`
	// Ratio is DiskMedianRPS / RefMedianRPS.
	Ratio float64 `json:"ratio"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// read returns the comparison of kind k, or nil.
func (rr *ReferenceResult) read(k string) *ReferenceRead {
	if rr == nil {
		return nil
	}
	for i := range rr.Reads {
		if rr.Reads[i].Kind == k {
			return &rr.Reads[i]
		}
	}
	return nil
}

// referenceLoad creates a schema of its own in the reference database and
// loads the chain file into it; the returned drop removes it.
func (r *runner) referenceLoad(ctx context.Context, s *ScaleResult, path string) (drop func(), err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	rr := &ReferenceResult{Schema: "utxo_ref_" + hex.EncodeToString(b[:]), Rounds: r.o.ReferenceRounds,
		PhaseSeconds: r.o.ReferenceDuration.Seconds(), Workers: r.o.Workers, Conns: referenceConns}
	s.Reference = rr
	db, err := pgref.Open(ctx, r.o.ReferenceDSN, 2)
	if err != nil {
		return nil, fmt.Errorf("reference: %w (PostgreSQL: apt-get install postgresql; or --reference-rounds -1)", err)
	}
	drop = func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := db.Drop(dctx, rr.Schema); err != nil {
			r.logf("reference: drop schema %s: %v", rr.Schema, err)
		}
		db.Close()
	}
	r.logf("reference: loading %s into PostgreSQL schema %s", path, rr.Schema)
	if rr.Load, err = db.Load(ctx, rr.Schema, path); err != nil {
		drop()
		return nil, fmt.Errorf("reference: %w", err)
	}
	r.logf("reference: %d live UTXOs (%d created, %d spent) in %.1fs (COPY %.1fs), %d MiB with indexes",
		rr.Load.Live, rr.Load.Created, rr.Load.Spent, rr.Load.Seconds, rr.Load.CopySeconds, rr.Load.Bytes>>20)
	if rr.Load.Live != int64(s.Chain.UTXOs) {
		drop()
		return nil, fmt.Errorf("reference: %d live UTXOs, the chain has %d", rr.Load.Live, s.Chain.UTXOs)
	}
	return drop, nil
}

// referenceCompare runs the comparison on the settled store and the loaded
// reference.
func (r *runner) referenceCompare(ctx context.Context, s *ScaleResult, dataDir string) error {
	rr := s.Reference
	if r.o.BareBin == "" {
		return errors.New("reference: the reference server runs in a utxo-loadtest subprocess: BareBin is not set")
	}
	svc, err := r.startServe(ctx, "serve (reference comparison)", dataDir, "serve-reference.log", nil, r.serviceArgs(ConfigDisk))
	if err != nil {
		return err
	}
	defer svc.stop(20 * time.Second)
	port, err := freePort()
	if err != nil {
		return err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	p, err := startProcess("reference server", filepath.Join(r.dir, "reference.log"), r.o.BareBin,
		"--reference-serve", "127.0.0.1:"+strconv.Itoa(port), "--reference-dsn", r.o.ReferenceDSN, "--reference-schema", rr.Schema)
	if err != nil {
		return err
	}
	defer p.stop(10 * time.Second)
	if err := waitHTTP(ctx, r.ctl, base+"/readyz", p, 30*time.Second); err != nil {
		return err
	}
	disk := target{name: "disk (reference comparison)", bases: []string{svc.base}, pid: svc.pid()}
	ref := target{name: "postgres reference", bases: []string{base}, pid: p.pid()}
	saved := r.gen
	defer func() { r.gen = saved }()
	for _, k := range referenceKinds {
		rr.Reads = append(rr.Reads, ReferenceRead{Kind: k.String()})
	}
	r.phaseN = 300 // their own request seeds
	for round := 0; round < rr.Rounds && ctx.Err() == nil; round++ {
		for i, k := range referenceKinds {
			var m Mix
			m[k] = 1
			rd := &rr.Reads[i]
			for _, side := range []target{disk, ref} {
				r.gen = &reqGen{mix: m, w: r.w, limit: r.o.PageLimit, batch: r.o.LookupBatch, maxDepth: r.o.MaxDepth}
				ph := r.phase(ctx, side, "reference-"+k.String(), phaseClosed, 0, r.o.ReferenceDuration)
				if ph.OK == 0 {
					return fmt.Errorf("reference: %s %s: no request succeeded (errors %v)", side.name, k, ph.Errors)
				}
				errs := ph.Requests - ph.OK
				if side.name == disk.name {
					rd.DiskRPS, rd.DiskP99, rd.DiskErrors = append(rd.DiskRPS, ph.AchievedRate), append(rd.DiskP99, ph.Latency.P99), rd.DiskErrors+errs
				} else {
					rd.RefRPS, rd.RefP99, rd.RefErrors = append(rd.RefRPS, ph.AchievedRate), append(rd.RefP99, ph.Latency.P99), rd.RefErrors+errs
				}
				r.logf("reference round %d: %s %s: %.0f req/s, p99 %.2f ms, errors %v", round+1, side.name, k, ph.AchievedRate, ph.Latency.P99, ph.Errors)
			}
		}
	}
	for i := range rr.Reads {
		rd := &rr.Reads[i]
		rd.DiskMedianRPS, rd.RefMedianRPS = median(rd.DiskRPS), median(rd.RefRPS)
		rd.DiskMedianP99, rd.RefMedianP99 = median(rd.DiskP99), median(rd.RefP99)
		if rd.RefMedianRPS > 0 {
			rd.Ratio = rd.DiskMedianRPS / rd.RefMedianRPS
		}
		r.logf("reference: %s disk %.0f req/s (p99 %.2f ms), postgres %.0f req/s (p99 %.2f ms): %.2f ×",
			rd.Kind, rd.DiskMedianRPS, rd.DiskMedianP99, rd.RefMedianRPS, rd.RefMedianP99, rd.Ratio)
	}
	return ctx.Err()
}

// ServeReference serves the PostgreSQL reference's reads from schema (a
// schema the harness loaded) on addr until ctx ends, with the service's
// HTTP server settings; GET /readyz answers 200. The harness starts it as
// a subprocess (utxo-loadtest --reference-serve).
func ServeReference(ctx context.Context, addr, dsn, schema string) error {
	db, err := pgref.Open(ctx, dsn, referenceConns)
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := db.NewServer(ctx, schema)
	if err != nil {
		return err
	}
	reads := srv.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/readyz" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ready"}`))
			return
		}
		reads.ServeHTTP(w, req)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := node.NewHTTPServer(h, slog.New(slog.DiscardHandler))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
