package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/loadtest/pgref"
)

// openTestReference connects to the local PostgreSQL (UTXO_CACHE_PG_DSN,
// else pgref.DefaultDSN) and returns it with a fresh schema name that the
// test's cleanup drops. An unreachable server fails the test with the
// install command.
func openTestReference(t *testing.T, ctx context.Context) (*pgref.DB, string) {
	t.Helper()
	dsn := os.Getenv("UTXO_CACHE_PG_DSN")
	if dsn == "" {
		dsn = pgref.DefaultDSN
	}
	db, err := pgref.Open(ctx, dsn, 8)
	if err != nil {
		t.Fatalf("PostgreSQL is not reachable at %s: %v\ninstall and start it: apt-get install postgresql (trust auth on 127.0.0.1, database test), or set UTXO_CACHE_PG_DSN", dsn, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgref_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if err := db.Drop(context.Background(), schema); err != nil {
			t.Errorf("drop %s: %v", schema, err)
		}
		db.Close()
	})
	return db, schema
}

// getJSON GETs base+path and decodes its body; it returns the status too.
func getJSON(t *testing.T, c *http.Client, base, path string) (int, map[string]any) {
	t.Helper()
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET %s%s: %v: %s", base, path, err, b)
	}
	return resp.StatusCode, v
}

// TestReferenceAnswersEqualService loads one generated chain into the
// service's store (utxo-cache ingest) and into the PostgreSQL reference,
// and holds the reference's balances, first pages (both orders) and
// outpoints to the service's /v1 answers for a sample of addresses (the
// most popular, the exchanges', rarely used ones and one never used) and of
// live outpoints, plus one absent outpoint. Only next_cursor's value
// differs by design (each side's cursors are its own): its presence must
// match.
func TestReferenceAnswersEqualService(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses and needs PostgreSQL")
	}
	for _, profile := range []workload.Profile{workload.Bitcoin, workload.Cardano} {
		t.Run(profile.String(), func(t *testing.T) {
			t.Parallel() // each its own chain, store, serve and schema: they mostly wait
			testReferenceEqual(t, profile)
		})
	}
}

func testReferenceEqual(t *testing.T, profile workload.Profile) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, schema := openTestReference(t, ctx)
	bin := smokeBinary(t)
	dir := t.TempDir()

	o := Options{Scenario: ScenarioScale, Profile: profile, Seed: 11, UTXOs: 30_000, TxsPerBlock: 20}.EnsureDefaults()
	wo := o.workloadOptions()
	wo.Spendable = 8000 // some outputs frozen: the bounded generator's chains
	g, err := workload.New(wo)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "chain.cbor")
	bf, err := createBlockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := streamChain(g, o.plan(), bf.write)
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	dataDir := filepath.Join(dir, "data")
	if out, err := exec.CommandContext(ctx, bin, "ingest", "--data-dir", dataDir, path).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v\n%s", err, out)
	}
	ls, err := db.Load(ctx, schema, path)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Live != int64(st.UTXOs) || ls.Blocks != st.Blocks {
		t.Fatalf("the reference holds %d live UTXOs of %d blocks; the chain: %+v", ls.Live, ls.Blocks, st)
	}
	t.Logf("chain %+v; reference load %+v", st, ls)

	r := &runner{o: Options{Bin: bin, Log: testLog{t}}, dir: dir, ctl: newClient(4, 30*time.Second), start: time.Now()}
	defer r.ctl.CloseIdleConnections()
	svc, err := r.startServe(ctx, "serve", dataDir, "serve.log", nil, []string{"--memory-cache-bytes", "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.stop(10 * time.Second)
	srv, err := db.NewServer(ctx, schema)
	if err != nil {
		t.Fatal(err)
	}
	ref := httptest.NewServer(srv.Handler())
	defer ref.Close()
	c := ref.Client()

	compare := func(path string) {
		t.Helper()
		ws, want := getJSON(t, r.ctl, svc.base, path)
		gs, got := getJSON(t, c, ref.URL, path)
		if _, ok := want["next_cursor"]; ok {
			if (want["next_cursor"] == nil) != (got["next_cursor"] == nil) {
				t.Errorf("%s: next_cursor %v, the service's %v", path, got["next_cursor"], want["next_cursor"])
			}
			delete(want, "next_cursor")
			delete(got, "next_cursor")
		}
		if e, ok := want["error"].(map[string]any); ok { // messages may be worded differently
			delete(e, "message")
			delete(got["error"].(map[string]any), "message")
		}
		if ws != gs || !reflect.DeepEqual(want, got) {
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			t.Errorf("%s:\nreference %d %s\nservice   %d %s", path, gs, gb, ws, wb)
		}
	}
	addrs := append([]string{"never-used-address"}, g.HotAddresses()...)
	for i := 0; i < 40; i++ {
		addrs = append(addrs, g.OrdinaryAddress(i))
	}
	for i := 100; i < wo.Addresses; i += wo.Addresses / 20 {
		addrs = append(addrs, g.OrdinaryAddress(i))
	}
	for _, a := range addrs {
		p := "/v1/addresses/" + url.PathEscape(a)
		compare(p + "/balance")
		compare(p + "/utxos?limit=100")
		compare(p + "/utxos?limit=100&order=desc")
		compare(p + "/utxos?limit=7")
	}
	n := 0
	for op := range g.LiveOutPoints() {
		if n%97 == 0 {
			compare("/v1/utxos/" + op.TxHash.String() + "/" + strconv.FormatUint(uint64(op.Index), 10))
		}
		n++
	}
	compare("/v1/utxos/" + chain.Hash{1, 2, 3}.String() + "/0")
	if t.Failed() {
		return
	}
	t.Logf("%d addresses (4 reads each) and %d outpoints answered alike", len(addrs), n/97+2)
}
