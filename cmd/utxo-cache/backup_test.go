package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/replication/storedir"
)

// The backup tests: checkpoint writes an archive of a store, restore installs
// it elsewhere only after verifying it, and a store restored is the store
// backed up (the same stats --json line) and goes on taking blocks.

// checkpointManifest is the manifest entry of an archive
// (UTXO-CACHE-CHECKPOINT.json).
type checkpointManifest struct {
	Seq       uint64    `json:"seq"`
	Tip       *statsTip `json:"tip"`
	UtxoCount uint64    `json:"utxo_count"`
	Digest    string    `json:"utxo_digest"`
}

const manifestEntry = "UTXO-CACHE-CHECKPOINT.json"

// tarEntry is one file of an archive.
type tarEntry struct {
	name string
	data []byte
}

func readTar(t *testing.T, archive []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		out = append(out, tarEntry{name: h.Name, data: data})
	}
}

func writeTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// manifestOf checks that the archive's first entry is its manifest, and
// returns it.
func manifestOf(t *testing.T, archive []byte) checkpointManifest {
	t.Helper()
	entries := readTar(t, archive)
	if len(entries) == 0 || entries[0].name != manifestEntry {
		t.Fatalf("the archive does not start with %s: %d entries", manifestEntry, len(entries))
	}
	var m checkpointManifest
	if err := json.Unmarshal(entries[0].data, &m); err != nil {
		t.Fatalf("manifest %s: %v", entries[0].data, err)
	}
	return m
}

// wantManifest checks the manifest against the stats line the store must
// have and its commit sequence.
func wantManifest(t *testing.T, m checkpointManifest, seq uint64, stats string) {
	t.Helper()
	got, err := json.Marshal(statsJSON{Tip: m.Tip, UtxoCount: m.UtxoCount, UtxoDigest: m.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if m.Seq != seq || string(got) != stats {
		t.Fatalf("manifest at seq %d: %s\nwant seq %d: %s", m.Seq, got, seq, stats)
	}
}

// wantNothingAt fails unless nothing exists at path.
func wantNothingAt(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(path)
		t.Fatalf("%s exists (%v), holding %d entries", path, err, len(entries))
	}
}

func TestBackupRoundTrip(t *testing.T) {
	t.Parallel()
	c := newTestChain(6)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks[:5]))
	// A rollback is a change of its own: the archive carries seq 6 at tip 4.
	mustCLI(t, "rollback", "--data-dir", store, "--height", "4")

	backup := filepath.Join(dir, "backup.tar")
	r := mustCLI(t, "checkpoint", "--data-dir", store, "--out", backup)
	archive, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	tip := c.blocks[3].Hash.String()
	for _, want := range []string{"seq 6", "tip 4/" + tip, fmt.Sprintf("%d UTXOs", len(c.states[4])),
		"digest " + c.states[4].digest().String(), fmt.Sprintf("wrote %d bytes to %s", len(archive), backup)} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("checkpoint's summary lacks %q: %s", want, r)
		}
	}
	if r.stdout != "" {
		t.Errorf("checkpoint --out FILE wrote to stdout: %q", r.stdout)
	}
	wantManifest(t, manifestOf(t, archive), 6, c.stats(4))
	wantNothingAt(t, filepath.Join(store, node.CheckpointStaging))
	if left, _ := filepath.Glob(filepath.Join(dir, ".backup.tar.partial-*")); len(left) > 0 {
		t.Errorf("temporary files left beside the archive: %v", left)
	}

	restored := filepath.Join(dir, "restored")
	r = mustCLI(t, "restore", "--data-dir", restored, backup)
	if want := "restore: verified and installed " + restored + ": seq 6, tip 4/" + tip; !strings.HasPrefix(r.stdout, want) {
		t.Fatalf("restore printed %q, want it to start with %q", r.stdout, want)
	}
	wantStats(t, restored, c.stats(4))
	wantStats(t, store, c.stats(4))
	wantNothingAt(t, restored+".installing")

	// The restored store is a store: it takes the next blocks.
	mustCLI(t, "ingest", "--data-dir", restored, writeJSONL(t, dir, "more.jsonl", c.blocks[4:]))
	wantStats(t, restored, c.stats(6))

	// An empty directory is a fine target; an archive from standard input
	// and to standard output too.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	r = mustCLI(t, "checkpoint", "--data-dir", restored, "--out", "-")
	wantManifest(t, manifestOf(t, []byte(r.stdout)), 8, c.stats(6))
	if !strings.Contains(r.stderr, fmt.Sprintf("wrote %d bytes to standard output", len(r.stdout))) {
		t.Errorf("checkpoint --out - summary: %s", r.stderr)
	}
	if r = cli(t, nil, strings.NewReader(r.stdout), "restore", "--data-dir", empty, "-"); r.code != 0 {
		t.Fatalf("restore -: %s", r)
	}
	wantStats(t, empty, c.stats(6))
}

// TestCheckpointOfAReplicaDataDir: a replica's data directory names its
// store in CURRENT; checkpoint follows it.
func TestCheckpointOfAReplicaDataDir(t *testing.T) {
	t.Parallel()
	c := newTestChain(3)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))
	replica := filepath.Join(dir, "replica")
	if err := os.Mkdir(replica, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(store, filepath.Join(replica, "store-42")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, replica, storedir.CurrentFile, []byte("store-42\n"))
	r := mustCLI(t, "checkpoint", "--data-dir", replica, "--out", "-")
	wantManifest(t, manifestOf(t, []byte(r.stdout)), 3, c.stats(3))
	entries, err := os.ReadDir(replica)
	if err != nil || len(entries) != 2 {
		t.Fatalf("the replica's data dir holds %d entries (%v), want CURRENT and store-42", len(entries), err)
	}
}

func TestCheckpointRefusals(t *testing.T) {
	t.Parallel()
	c := newTestChain(2)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))
	out := filepath.Join(dir, "backup.tar")

	missing := filepath.Join(dir, "missing")
	wantFail(t, cli(t, nil, nil, "checkpoint", "--data-dir", missing, "--out", out), 1, "no store at")
	wantNothingAt(t, missing)
	// An existing directory without a store does not get an empty one.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	wantFail(t, cli(t, nil, nil, "checkpoint", "--data-dir", empty, "--out", out), 1, "no store at")
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("checkpoint of an empty directory left %d entries in it", len(entries))
	}
	wantFail(t, cli(t, nil, nil, "checkpoint", "--data-dir", store, "--out", dir), 1, "is a directory")
	wantFail(t, cli(t, nil, nil, "checkpoint", "--data-dir", store, "--out", filepath.Join(dir, "no", "such.tar")), 1, "write the archive")
	wantNothingAt(t, filepath.Join(store, node.CheckpointStaging))
	wantNothingAt(t, out)

	for _, args := range [][]string{
		{"checkpoint", "--data-dir", store},
		{"checkpoint", "--data-dir", store, "--out", out, "extra"},
	} {
		wantFail(t, cli(t, nil, nil, args...), 2, "Run 'utxo-cache checkpoint --help'")
	}
	wantNothingAt(t, out)
	wantStats(t, store, c.stats(2))
}

// TestCheckpointOfAServedStore: a store a server holds is refused (the
// writer serves its checkpoints itself), and the writer's archive restores
// like checkpoint's.
func TestCheckpointOfAServedStore(t *testing.T) {
	t.Parallel()
	c := newTestChain(3)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))
	p := startServe(t, store, "--replication-token", "repl-token")
	out := filepath.Join(dir, "backup.tar")
	wantFail(t, cli(t, nil, nil, "checkpoint", "--data-dir", store, "--out", out), 1, "has the store open")
	wantNothingAt(t, out)

	req, err := http.NewRequest(http.MethodGet, p.base+"/v1/replication/checkpoint", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer repl-token")
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/replication/checkpoint: %d, %v", resp.StatusCode, err)
	}
	if got := resp.Header.Get("X-Commit-Seq"); got != "3" {
		t.Errorf("X-Commit-Seq %q, want 3", got)
	}
	wantManifest(t, manifestOf(t, archive), 3, c.stats(3))
	p.stop()

	restored := filepath.Join(dir, "restored")
	if r := cli(t, nil, bytes.NewReader(archive), "restore", "--data-dir", restored, "-"); r.code != 0 {
		t.Fatalf("restore of the writer's archive: %s", r)
	}
	wantStats(t, restored, c.stats(3))
}

// TestRestoreRefusesATamperedArchive: whatever is wrong with the archive,
// restore exits 1 and leaves nothing at --data-dir (nor beside it).
func TestRestoreRefusesATamperedArchive(t *testing.T) {
	t.Parallel()
	c := newTestChain(4)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))
	archive := []byte(mustCLI(t, "checkpoint", "--data-dir", store, "--out", "-").stdout)
	entries := readTar(t, archive)
	var tables []string
	for _, e := range entries {
		if strings.HasSuffix(e.name, ".sst") {
			tables = append(tables, e.name)
		}
	}
	if len(tables) == 0 {
		t.Fatalf("the archive holds no sstable: %d entries", len(entries))
	}

	// edit returns the archive with the entry name changed by f.
	edit := func(name string, f func([]byte) []byte) []byte {
		var out []tarEntry
		for _, e := range entries {
			if e.name == name {
				e.data = f(bytes.Clone(e.data))
			}
			out = append(out, e)
		}
		return writeTar(t, out)
	}
	editManifest := func(f func(m map[string]any)) []byte {
		return edit(manifestEntry, func(raw []byte) []byte {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			f(m)
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		})
	}
	without := func(name string) []byte {
		var out []tarEntry
		for _, e := range entries {
			if e.name != name {
				out = append(out, e)
			}
		}
		return writeTar(t, out)
	}
	cases := []struct {
		name    string
		archive []byte
		want    string
	}{
		{"count edited", editManifest(func(m map[string]any) { m["utxo_count"] = m["utxo_count"].(float64) + 1 }), "does not match"},
		{"digest edited", editManifest(func(m map[string]any) { m["utxo_digest"] = strings.Repeat("ab", 32) }), "does not match"},
		{"seq edited", editManifest(func(m map[string]any) { m["seq"] = 3 }), "does not match"},
		{"tip edited", editManifest(func(m map[string]any) { m["tip"] = nil }), "does not match"},
		{"manifest not JSON", edit(manifestEntry, func([]byte) []byte { return []byte("{") }), "bad checkpoint archive"},
		{"no manifest", without(manifestEntry), "bad checkpoint archive"},
		{"truncated", archive[:len(archive)/2], "extract checkpoint"},
		{"not an archive", []byte("hello"), "extract checkpoint"},
		{"empty input", nil, "checkpoint"},
	}
	// A flipped bit anywhere in an sstable: Pebble's block checksums catch
	// it during the recount, which reads every row.
	for _, name := range tables {
		size := 0
		for _, e := range entries {
			if e.name == name {
				size = len(e.data)
			}
		}
		for _, off := range []int{0, size / 3, size / 2, size - 100} {
			cases = append(cases, struct {
				name    string
				archive []byte
				want    string
			}{fmt.Sprintf("%s bit flipped at %d of %d", name, off, size), edit(name, func(b []byte) []byte { b[off] ^= 0x10; return b }), ""})
		}
	}
	for i, tc := range cases {
		target := filepath.Join(dir, fmt.Sprintf("restored-%d", i))
		file := writeFile(t, dir, fmt.Sprintf("tampered-%d.tar", i), tc.archive)
		r := cli(t, nil, nil, "restore", "--data-dir", target, file)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: want exit 1 mentioning %q: %s", tc.name, tc.want, r)
		}
		wantNothingAt(t, target)
		wantNothingAt(t, target+".installing")
	}
	// The untouched archive, through the same helper, restores.
	target := filepath.Join(dir, "restored")
	mustCLI(t, "restore", "--data-dir", target, writeFile(t, dir, "good.tar", writeTar(t, entries)))
	wantStats(t, target, c.stats(4))
}

func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	c := newTestChain(2)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	mustCLI(t, "ingest", "--data-dir", store, writeJSONL(t, dir, "blocks.jsonl", c.blocks))
	backup := filepath.Join(dir, "backup.tar")
	mustCLI(t, "checkpoint", "--data-dir", store, "--out", backup)

	// A directory with anything in it is not touched.
	busy := filepath.Join(dir, "busy")
	if err := os.Mkdir(busy, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := writeFile(t, busy, "keep.txt", []byte("mine"))
	wantFail(t, cli(t, nil, nil, "restore", "--data-dir", busy, backup), 1, "is not empty")
	if got, err := os.ReadFile(keep); err != nil || string(got) != "mine" {
		t.Fatalf("restore touched the non-empty directory: %q, %v", got, err)
	}
	wantNothingAt(t, busy+".installing")
	// Nor is an existing store.
	wantFail(t, cli(t, nil, nil, "restore", "--data-dir", store, backup), 1, "is not empty")
	wantStats(t, store, c.stats(2))
	// A file, a missing parent, a missing archive.
	wantFail(t, cli(t, nil, nil, "restore", "--data-dir", keep, backup), 1, "not a directory")
	wantFail(t, cli(t, nil, nil, "restore", "--data-dir", filepath.Join(dir, "no", "store"), backup), 1, "is not a directory")
	wantNothingAt(t, filepath.Join(dir, "no"))
	emptyTarget := filepath.Join(dir, "empty")
	if err := os.Mkdir(emptyTarget, 0o755); err != nil {
		t.Fatal(err)
	}
	wantFail(t, cli(t, nil, nil, "restore", "--data-dir", emptyTarget, filepath.Join(dir, "missing.tar")), 1, "missing.tar")
	if fi, err := os.Stat(emptyTarget); err != nil || !fi.IsDir() {
		t.Fatalf("a restore that could not open its archive removed the empty target: %v", err)
	}

	for _, args := range [][]string{
		{"restore", "--data-dir", filepath.Join(dir, "x")},
		{"restore", "--data-dir", filepath.Join(dir, "x"), backup, backup},
	} {
		wantFail(t, cli(t, nil, nil, args...), 2, "Run 'utxo-cache restore --help'")
	}
	wantNothingAt(t, filepath.Join(dir, "x"))
}
