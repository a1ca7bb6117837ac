package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/replication/storedir"
	"github.com/utxo-cache/utxo-cache/writer"
)

// writerConfig is a small writer node in dir.
func writerConfig(dir string) node.Config {
	return node.Config{
		DataDir: dir, MemTableBytes: 4 << 20, MemoryCacheBytes: 8 << 20,
		AdminToken: "admin", ReplicationToken: "repl",
	}
}

func block(height uint64) *chain.Block {
	h := func(parts ...any) chain.Hash { return sha256.Sum256(fmt.Append(nil, parts...)) }
	b := &chain.Block{Height: height, Hash: h("block", height), Time: 1_700_000_000, Txs: []chain.Tx{{
		Hash: h("tx", height), Outputs: []chain.Output{{Address: "addr", Value: 1}}}}}
	if height > 0 {
		b.PrevHash = h("block", height-1)
	}
	return b
}

func do(t *testing.T, srv *httptest.Server, method, target, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestStartServeClose starts a writer node, applies a block through its
// API and one through its writer, and shuts it down in the documented
// steps; the store it leaves reopens at the same tip.
func TestStartServeClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	n, err := node.Start(context.Background(), writerConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	if code, body := do(t, srv, http.MethodPost, "/v1/blocks", "admin", chain.AppendBlockJSON(nil, block(0))); code != http.StatusOK {
		t.Fatalf("POST /v1/blocks: %d %s", code, body)
	}
	if res, err := n.Writer().Apply(context.Background(), block(1)); err != nil || !res.Applied {
		t.Fatalf("Writer().Apply: %+v, %v", res, err)
	}
	if code, body := do(t, srv, http.MethodGet, "/v1/tip", "", nil); code != http.StatusOK || !strings.Contains(body, `"height":1`) {
		t.Fatalf("GET /v1/tip: %d %s", code, body)
	}
	if code, _ := do(t, srv, http.MethodGet, "/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("GET /readyz before Drain: %d", code)
	}
	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, srv, http.MethodGet, "/readyz", "", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("GET /readyz after Drain: %d %s", code, body)
	}
	srv.Close()
	w := n.Writer()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := w.Apply(context.Background(), block(2)); !errors.Is(err, writer.ErrClosed) {
		t.Fatalf("Apply after Close: %v, want writer.ErrClosed", err)
	}

	n, err = node.Start(context.Background(), writerConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if tip := n.Store().Published().Tip; tip.Height != 1 {
		t.Fatalf("reopened at %s, want height 1", tip)
	}
}

// TestStartRefused: a setting refused before the store opens leaves no
// store behind, and nothing running.
func TestStartRefused(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := filepath.Join(t.TempDir(), "data")
	cfg := writerConfig(dir)
	cfg.RedisURL = "not a url"
	if _, err := node.Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "redis tier") {
		t.Fatalf("Start with a bad Redis URL: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start left %s behind (%v)", dir, err)
	}
}

func TestValidate(t *testing.T) {
	ok := writerConfig("dir")
	for _, tc := range []struct {
		name string
		edit func(*node.Config)
		want string // "" valid
	}{
		{"writer", func(*node.Config) {}, ""},
		{"no data dir", func(c *node.Config) { c.DataDir = "" }, "no data directory"},
		{"negative memory", func(c *node.Config) { c.MemoryCacheBytes = -1 }, "memory cache bytes"},
		{"ballast below auto", func(c *node.Config) { c.BallastBytes = -2 }, "ballast bytes"},
		{"negative apply wait", func(c *node.Config) { c.ApplyPriorityWait = -1 }, "apply priority wait"},
		{"replica", func(c *node.Config) { c.ReplicaOf, c.AdminToken = "http://w", "" }, ""},
		{"replica without token", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.ReplicationToken = "http://w", "", ""
		}, "replication token"},
		{"replica taking writes", func(c *node.Config) { c.ReplicaOf = "http://w" }, "takes no writes"},
		{"writer with a wallet token", func(c *node.Config) { c.WalletToken = "wallet" }, ""},
		{"wallet token is the admin token", func(c *node.Config) { c.WalletToken = c.AdminToken }, "wallet token is the admin token"},
		{"replica reading leases", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.WalletToken = "http://w", "", "wallet"
		}, ""},
		{"replica following bitcoin", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.FollowBitcoinREST = "http://w", "", "http://b"
		}, "not a Bitcoin node"},
		{"replica with a chain", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.Chain = "http://w", "", "bitcoin"
		}, "writer's chain"},
		{"replica following cardano", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.FollowCardano = "http://w", "", "127.0.0.1:3001"
		}, "not a Cardano node"},
		{"following both", func(c *node.Config) { c.FollowBitcoinREST, c.FollowCardano = "http://b", "127.0.0.1:3001" }, "not both"},
		{"following cardano", func(c *node.Config) { c.FollowCardano = "127.0.0.1:3001" }, ""},
		{"writer publishing to JetStream", func(c *node.Config) { c.JetStream = "nats://a:4222,nats://b:4222" }, ""},
		{"JetStream without a port", func(c *node.Config) { c.JetStream = "nats://a" }, "want nats://host:port"},
		{"JetStream name with a dot", func(c *node.Config) { c.JetStream, c.JetStreamName = "nats://a:4222", "a.b" }, "letters, digits"},
		{"JetStream replicas", func(c *node.Config) { c.JetStream, c.JetStreamReplicas = "nats://a:4222", 7 }, "1 to 5"},
		{"replica over JetStream needs no token", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.ReplicationToken = "nats://a:4222,tls://b:4222", "", ""
		}, ""},
		{"replica over JetStream, bad server", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken = "nats://a:4222,http://b:1", ""
		}, "want nats://host:port"},
		{"replica publishing to JetStream", func(c *node.Config) {
			c.ReplicaOf, c.AdminToken, c.JetStream = "nats://a:4222", "", "nats://a:4222"
		}, "publishes nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.EnsureDefaults().Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEnsureDefaults(t *testing.T) {
	c := node.Config{DataDir: "d"}.EnsureDefaults()
	if c.Logger == nil || c.StallTimeout <= 0 || c.MaxChangeStreams <= 0 || c.CheckpointIdleTimeout <= 0 ||
		c.MaxBlockBytes <= 0 || c.BitcoinNetwork != bitcoin.Mainnet {
		t.Fatalf("EnsureDefaults left a default unset: %+v", c)
	}
	if c.ApplyPriorityWait != 0 || c.MaxWait != 0 || c.DiskReserve != 0 {
		t.Fatalf("EnsureDefaults set a value whose zero means something: %+v", c)
	}
	log := slog.New(slog.DiscardHandler)
	if c := (node.Config{Logger: log}).EnsureDefaults(); c.Logger != log {
		t.Fatal("EnsureDefaults replaced a given logger")
	}
}

// waitFor polls cond until it holds, failing after 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicaStartClose starts a writer node and a replica node of it in
// process: the replica bootstraps from the writer's checkpoint, follows its
// change log, names its verified store, and both shut down leaving nothing
// running.
func TestReplicaStartClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	wn, err := node.Start(context.Background(), writerConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	wsrv := httptest.NewServer(wn.Handler())
	for h := range uint64(3) {
		if _, err := wn.Writer().Apply(context.Background(), block(h)); err != nil {
			t.Fatal(err)
		}
	}

	dataDir := t.TempDir()
	dir := storedir.New(storedir.OS(), dataDir)
	rn, err := node.Start(context.Background(), node.Config{
		DataDir: dataDir, ReplicaOf: wsrv.URL, ReplicationToken: "repl", MemoryCacheBytes: 8 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rn.Handler())
	waitFor(t, "the replica serves the writer's tip", func() bool {
		code, body := do(t, rsrv, http.MethodGet, "/v1/tip", "", nil)
		return code == http.StatusOK && strings.Contains(body, `"height":2`)
	})
	if name, _ := dir.Current(); !strings.HasPrefix(name, "store-") {
		t.Fatalf("the replica serves without naming its store (%q)", name)
	}
	if _, err := wn.Writer().Apply(context.Background(), block(3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replica follows the writer", func() bool {
		code, body := do(t, rsrv, http.MethodGet, "/v1/tip", "", nil)
		return code == http.StatusOK && strings.Contains(body, `"height":3`)
	})
	select {
	case err := <-rn.Err():
		t.Fatalf("replica: %v", err)
	default:
	}

	if err := rn.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, rsrv, http.MethodGet, "/readyz", "", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("replica's /readyz after Drain: %d %s", code, body)
	}
	rsrv.Close()
	if err := rn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := wn.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	wsrv.Close()
	if err := wn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestErrReportsTheFollower: a Bitcoin follower that stops with an error
// is reported on Err, once; the node still closes in order.
func TestErrReportsTheFollower(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := writerConfig(t.TempDir())
	cfg.FollowBitcoinREST = "ftp://node" // refused by the follower when it runs
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n.Err():
		if !strings.Contains(err.Error(), "bitcoin follower") {
			t.Fatalf("Err: %v, want the follower's", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's error was not reported within 10s")
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestBootstrappingReplicaRefusesWrites: a replica whose writer has not
// given it a store yet answers reads 503 unavailable (try again), but
// writes 403 read_only, as it will once it serves: no retry makes a
// replica take a write.
func TestBootstrappingReplicaRefusesWrites(t *testing.T) {
	defer goleak.VerifyNone(t)
	asked := make(chan struct{}, 1)
	writer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"not now"}}`))
	}))
	defer writer.Close()
	rn, err := node.Start(context.Background(), node.Config{
		DataDir: t.TempDir(), ReplicaOf: writer.URL, ReplicationToken: "repl", MemoryCacheBytes: 8 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(rn.Handler())
	<-asked // the replica is bootstrapping: its writer refused it once
	for _, w := range [][2]string{{http.MethodPost, "/v1/blocks"}, {http.MethodPost, "/v1/rollback"},
		{http.MethodPost, "/v1/frozen"}, {http.MethodDelete, "/v1/frozen"}} {
		code, body := do(t, rsrv, w[0], w[1], "admin", []byte(`{}`))
		if code != http.StatusForbidden || !strings.Contains(body, `"read_only"`) {
			t.Errorf("%s %s while bootstrapping: %d %s, want 403 read_only", w[0], w[1], code, body)
		}
	}
	if code, body := do(t, rsrv, http.MethodGet, "/v1/tip", "", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, `"unavailable"`) {
		t.Errorf("GET /v1/tip while bootstrapping: %d %s, want 503 unavailable", code, body)
	}
	rsrv.Close()
	if err := rn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
