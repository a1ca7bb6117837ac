package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// noStore fails t unless dir does not exist.
func noStore(t *testing.T, dir string, r cliResult) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused command left %s behind (%v): %s", dir, err, r)
	}
}

// TestRefusedCommandsCreateNothing: a command refused for a usage error
// (exit 2), or for a setting that cannot work (a listen address, a Redis
// URL, a block placement), leaves no store directory behind.
func TestRefusedCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newTestChain(1)
	blocks := writeJSONL(t, dir, "blocks.jsonl", c.blocks)
	txt := writeFile(t, dir, "blocks.txt", []byte("{}\n"))
	btc := bitcoinFixture("blk_0_to_4.dat.bz2")
	midChain := bitcoinFixture("blk_3A.dat.bz2") // its parent, block 2, is in no store
	serveArgs := func(extra ...string) []string {
		return append([]string{"serve", "--listen", "127.0.0.1:0"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ingest"}, 2, "no FILE"},
		{[]string{"ingest", "--bogus", blocks}, 2, "-bogus"},
		{[]string{"ingest", "--format", "xml", blocks}, 2, "--format"},
		{[]string{"ingest", "--prune-depth", "0", blocks}, 2, "--prune-depth"},
		{[]string{"ingest", "--rollback-window", "0", blocks}, 2, "--rollback-window"},
		{[]string{"ingest", txt}, 2, "--format"},
		{[]string{"ingest", "-"}, 2, "--format"},
		{[]string{"ingest", "--format", "json", "-", "-"}, 2, "given 2 times"},
		{[]string{"ingest", filepath.Join(dir, "missing.jsonl")}, 1, "missing.jsonl"},
		{[]string{"ingest", "--indexes", "payment,bogus", blocks}, 2, "--indexes"},

		{[]string{"import-bitcoin"}, 2, "no FILE"},
		{[]string{"import-bitcoin", "--network", "dogecoin", btc}, 2, "--network"},
		{[]string{"import-bitcoin", "--start-height", "x", btc}, 2, "--start-height"},
		{[]string{"import-bitcoin", "--prune-depth", "0", btc}, 2, "--prune-depth"},
		{[]string{"import-bitcoin", "--indexes", "address", btc}, 2, "--indexes"},
		{[]string{"import-bitcoin", midChain}, 2, "not in the store"},
		{[]string{"import-bitcoin", "--start-height", "100", bitcoinFixture("277647.dat.bz2")}, 1, "at height 277647"},
		{[]string{"import-bitcoin", "--network", "testnet", btc}, 1, "another network"},
		{[]string{"import-bitcoin", filepath.Join(dir, "missing.dat")}, 1, "missing.dat"},

		{[]string{"import-cardano"}, 2, "no FILE"},
		{[]string{"import-cardano", "--catch-up-bytes", "lots", cardanoFixture("02019.chunk")}, 2, "--catch-up-bytes"},
		{[]string{"import-cardano", cardanoFixture("02019.chunk")}, 2, "--skip-unknown-inputs"},
		{[]string{"import-cardano", "--byron-genesis", cardanoFixture("mainnet-byron-genesis.json"), cardanoFixture("02019.chunk")}, 2, "seed the chain's start"},
		{[]string{"import-cardano", "--byron-genesis", blocks, cardanoFixture("genesis.block")}, 1, "bad genesis file"},
		{[]string{"import-cardano", dir}, 1, "no NNNNN.chunk files"},
		{[]string{"import-cardano", filepath.Join(dir, "missing.chunk")}, 1, "missing.chunk"},

		{[]string{"rollback"}, 2, "exactly one of --height and --hash"},
		{[]string{"rollback", "--height", "1", "--hash", strings.Repeat("0", 64)}, 2, "exactly one"},
		{[]string{"rollback", "--height", "x"}, 2, "--height"},
		{[]string{"rollback", "--hash", "zz"}, 2, "--hash"},
		{[]string{"rollback", "--height", "1", "extra"}, 2, "unexpected arguments"},
		{[]string{"rollback", "--height", "1", "--rollback-window", "0"}, 2, "--rollback-window"},
		{[]string{"rollback", "--height", "1"}, 1, "no store"},

		{[]string{"stats", "extra"}, 2, "unexpected arguments"},
		{[]string{"stats", "--bogus"}, 2, "-bogus"},
		{[]string{"stats"}, 1, "no store"},

		{[]string{"checkpoint"}, 2, "--out is required"},
		{[]string{"checkpoint", "--out", filepath.Join(dir, "backup.tar"), "extra"}, 2, "unexpected arguments"},
		{[]string{"checkpoint", "--out", filepath.Join(dir, "backup.tar")}, 1, "no store"},

		{[]string{"restore"}, 2, "want one archive"},
		{[]string{"restore", blocks, blocks}, 2, "want one archive"},
		{[]string{"restore", filepath.Join(dir, "missing.tar")}, 1, "missing.tar"},
		{[]string{"restore", blocks}, 1, "bad checkpoint archive"},

		{serveArgs("--bogus"), 2, "-bogus"},
		{serveArgs("--indexes", "all"), 2, "--indexes"},
		{serveArgs("extra"), 2, "no arguments"},
		{serveArgs("--prune-depth", "0"), 2, "--prune-depth"},
		{serveArgs("--memory-cache-bytes", "lots"), 2, "--memory-cache-bytes"},
		{serveArgs("--writer-nice", "20"), 2, "--writer-nice"},
		{serveArgs("--writer-nice", "-1"), 2, "--writer-nice"},
		{serveArgs("--log-level", "loud"), 2, "--log-level"},
		{serveArgs("--log-format", "xml"), 2, "--log-format"},
		{serveArgs("--bitcoin-network", "dogecoin"), 2, "--bitcoin-network"},
		{serveArgs("--cardano-network", "testnet"), 2, "--cardano-network"},
		{serveArgs("--cardano-start-point", "12"), 2, "--cardano-start-point"},
		{serveArgs("--follow-cardano", "no-port"), 2, "--follow-cardano"},
		{serveArgs("--byron-genesis", cardanoFixture("preview-byron-genesis.json")), 2, "seed a store that --follow-cardano follows"},
		{serveArgs("--follow-cardano", "127.0.0.1:3001", "--shelley-genesis", cardanoFixture("preview-shelley-genesis.json")), 2, "goes with --byron-genesis"},
		{serveArgs("--follow-cardano", "127.0.0.1:3001", "--byron-genesis", cardanoFixture("preview-byron-genesis.json"),
			"--cardano-start-point", "1."+strings.Repeat("ab", 32)), 2, "starts mid-chain"},
		{serveArgs("--follow-cardano", "127.0.0.1:3001", "--byron-genesis", blocks), 2, "bad genesis file"},
		{serveArgs("--follow-cardano", "127.0.0.1:3001", "--follow-bitcoin-rest", "http://127.0.0.1:8332"), 2, "one node"},
		{serveArgs("--follow-cardano", "127.0.0.1:3001", "--replica-of", "http://127.0.0.1:1", "--replication-token", "t"), 2, "a replica follows its writer"},
		{serveArgs("--admin-token", "a", "--admin-token-file", blocks), 2, "both set"},
		{serveArgs("--config", filepath.Join(dir, "missing.yaml")), 1, "config file"},
		{serveArgs("--config", writeFile(t, dir, "bad.yaml", []byte("colour: blue\n"))), 2, "unknown setting"},
		{[]string{"serve", "--listen", "no-port"}, 1, "listen on no-port"},
		{serveArgs("--admin-listen", "no-port"), 1, "admin listen on no-port"},
		{serveArgs("--redis-url", "http://nowhere"), 1, "redis tier"},
	} {
		store := filepath.Join(dir, "store")
		args := append([]string{tc.args[0], "--data-dir", store}, tc.args[1:]...)
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cli(t, nil, nil, args...)
			wantFail(t, r, tc.code, tc.want)
			noStore(t, store, r)
		})
	}
}

// TestImportBitcoinPlacementHints: a chain the store cannot place is refused
// with a hint that works when followed, and a hint is only given when it
// can work: --start-height for an empty store (with the block's own height
// when its coinbase carries it), never for a store the files do not
// continue.
func TestImportBitcoinPlacementHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	b277647 := bitcoinFixture("277647.dat.bz2")

	r := cli(t, nil, nil, "import-bitcoin", "--data-dir", store, b277647)
	wantFail(t, r, 2, "not in the store", "give --start-height 277647 (the height its coinbase carries)", "--skip-unknown-inputs")
	noStore(t, store, r)
	r = cli(t, nil, nil, "import-bitcoin", "--data-dir", store, "--skip-unknown-inputs", b277647)
	wantFail(t, r, 2, "give --start-height 277647")
	if strings.Contains(r.stderr, "and --skip-unknown-inputs") {
		t.Fatalf("the hint repeats a flag already given: %s", r)
	}
	noStore(t, store, r)
	// An empty directory is no store either: it stays empty.
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	r = cli(t, nil, nil, "import-bitcoin", "--data-dir", store, b277647)
	wantFail(t, r, 2, "give --start-height 277647")
	if entries, err := os.ReadDir(store); err != nil || len(entries) != 0 {
		t.Fatalf("the refused import wrote into the empty %s: %v %v", store, entries, err)
	}
	// Followed, the hint works.
	wantImported(t, mustCLI(t, "import-bitcoin", "--data-dir", store, "--start-height", "277647", "--skip-unknown-inputs", b277647), 1, 0, 0)

	// A store that the files do not continue: no --start-height can help.
	other := filepath.Join(dir, "other")
	mustCLI(t, "import-bitcoin", "--data-dir", other, bitcoinFixture("blk_0_to_4.dat.bz2"))
	before := statsJSONLine(t, other)
	r = cli(t, nil, nil, "import-bitcoin", "--data-dir", other, b277647)
	wantFail(t, r, 1, "not in the store (tip 4/", "do not continue the store's chain", "another --data-dir")
	if strings.Contains(r.stderr, "--start-height") {
		t.Fatalf("the hint suggests --start-height, which cannot extend this store: %s", r)
	}
	wantStats(t, other, before)
}

var rollbackHintRE = regexp.MustCompile(`utxo-cache (rollback --data-dir \S+ --height \d+(?: --rollback-window \d+)?)`)

// TestForkHints: a block below the tip that is not on the store's chain is
// refused with a rollback command when the store can roll back that far
// (and following it lets the other branch in), else with the advice of a
// new store and no rollback command.
func TestForkHints(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	fork := newTestChain(4)
	fork.blocks[1].Hash = testHash("fork", 2)
	dir := t.TempDir()
	main := writeJSONL(t, dir, "main.jsonl", c.blocks)
	forkFile := writeJSONL(t, dir, "fork.jsonl", fork.blocks[:2])

	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, "--rollback-window", "10", main)
	r := cli(t, nil, nil, "ingest", "--data-dir", store, "--rollback-window", "10", forkFile)
	wantFail(t, r, 1, "not on the store's chain", "roll it back first")
	m := rollbackHintRE.FindStringSubmatch(r.stderr)
	if m == nil || !strings.Contains(m[1], "--height 1 --rollback-window 10") {
		t.Fatalf("no rollback command to height 1 with the store's window: %s", r)
	}
	mustCLI(t, strings.Fields(m[1])...)
	if r := mustCLI(t, "ingest", "--data-dir", store, "--rollback-window", "10", forkFile); !strings.Contains(r.stdout, "applied 1 blocks") {
		t.Fatalf("after the hinted rollback: %s", r)
	}

	// The same with a window of 1: block 1 is 3 below the tip, too deep.
	shallow := filepath.Join(dir, "shallow")
	mustCLI(t, "ingest", "--data-dir", shallow, "--rollback-window", "1", main)
	r = cli(t, nil, nil, "ingest", "--data-dir", shallow, "--rollback-window", "1", forkFile)
	wantFail(t, r, 1, "not on the store's chain", "cannot be rolled back to height 1", "another --data-dir")
	if strings.Contains(r.stderr, "utxo-cache rollback") {
		t.Fatalf("a rollback command the store would refuse: %s", r)
	}

	// import-bitcoin: blocks 0..4, then the branch 3A: roll back to 2.
	btc := filepath.Join(dir, "btc")
	mustCLI(t, "import-bitcoin", "--data-dir", btc, bitcoinFixture("blk_0_to_4.dat.bz2"))
	branch := []string{bitcoinFixture("blk_3A.dat.bz2"), bitcoinFixture("blk_4A.dat.bz2"), bitcoinFixture("blk_5A.dat.bz2")}
	r = cli(t, nil, nil, append([]string{"import-bitcoin", "--data-dir", btc}, branch...)...)
	wantFail(t, r, 1, "height 3", "another chain or branch", "roll it back first")
	if strings.Contains(r.stderr, "--start-height") {
		t.Fatalf("--start-height was not given, yet the hint names it: %s", r)
	}
	m = rollbackHintRE.FindStringSubmatch(r.stderr)
	if m == nil || !strings.HasSuffix(m[1], "--height 2") {
		t.Fatalf("no rollback command to height 2: %s", r)
	}
	mustCLI(t, strings.Fields(m[1])...)
	wantImported(t, mustCLI(t, append([]string{"import-bitcoin", "--data-dir", btc}, branch...)...), 3, 0, 0)
}
