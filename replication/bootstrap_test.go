package replication

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// The bootstrap tests stand a fake writer in front of Bootstrap: an HTTP
// server that answers the checkpoint request with the headers of a real
// checkpoint and a body that lies in one way. After every write it measures
// what the replica has on disk for the store (the store's directory and its
// .installing one), so each test can check that the replica never held more
// than the bound the lie allows, and it stops an endless body at
// endlessGuard, far above every bound, so that a replica without the bound
// fails the test instead of filling the disk.

// endlessGuard ends an "endless" body: a replica that reads this far wrote
// what it should have refused.
const endlessGuard = 64 << 20

// fakeWriter is a writer's checkpoint endpoint that lies.
type fakeWriter struct {
	t      *testing.T
	url    string
	dir    string // the replica's store directory, measured
	header http.Header
	body   func(w io.Writer) // writes the archive; stops at the first error
	// maxHeld is the most bytes the replica held in dir, measured after
	// every write of the body; sent is the bytes written.
	maxHeld, sent, requests atomic.Int64
}

func newFakeWriter(t *testing.T, dir string, m Manifest, body func(w io.Writer)) *fakeWriter {
	t.Helper()
	fw := &fakeWriter{t: t, dir: dir, header: checkpointHeaders(m), body: body}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw.requests.Add(1)
		if r.URL.Path != "/v1/replication/checkpoint" {
			http.NotFound(w, r)
			return
		}
		for k, v := range fw.header {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusOK)
		fw.body(&measuringWriter{fw: fw, w: w, rc: http.NewResponseController(w)})
	}))
	t.Cleanup(srv.Close)
	fw.url = srv.URL
	return fw
}

// checkpointHeaders are the headers a writer sends with m's checkpoint.
func checkpointHeaders(m Manifest) http.Header {
	h := http.Header{}
	h.Set("X-Commit-Seq", strconv.FormatUint(m.Seq, 10))
	if m.Tip != nil {
		h.Set("X-Tip-Height", strconv.FormatUint(m.Tip.Height, 10))
		h.Set("X-Tip-Hash", m.Tip.Hash)
	}
	h.Set("X-Utxo-Count", strconv.FormatUint(m.UtxoCount, 10))
	h.Set("X-Utxo-Digest", m.Digest.String())
	h.Set("Content-Type", "application/x-tar")
	return h
}

type measuringWriter struct {
	fw *fakeWriter
	w  io.Writer
	rc *http.ResponseController
}

func (m *measuringWriter) Write(p []byte) (int, error) {
	n, err := m.w.Write(p)
	if err == nil {
		err = m.rc.Flush()
	}
	m.fw.sent.Add(int64(n))
	held := dirBytes(m.fw.dir) + dirBytes(m.fw.dir+".installing")
	if held > m.fw.maxHeld.Load() {
		m.fw.maxHeld.Store(held)
	}
	return n, err
}

// dirBytes is the size of the files under dir (0 when it does not exist).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// bootstrapFrom runs Bootstrap against fw with opts' bootstrap settings
// (a fake disk with room to spare unless opts.Space is set) and returns its
// error, after checking that a failure left nothing behind.
func (fw *fakeWriter) bootstrapFrom(opts TailOptions) error {
	fw.t.Helper()
	opts.URL, opts.Token = fw.url, "t"
	if opts.Space == nil {
		opts.Space, opts.KeepFree = fakeSpace(func() uint64 { return 1 << 40 }), 1
	}
	if opts.Metrics == nil {
		opts.Metrics = NewTailMetrics(nil)
	}
	_, err := Bootstrap(context.Background(), opts, fw.dir, 1<<40, disk.Options{})
	if err != nil {
		wantNothing(fw.t, fw.dir)
	}
	return err
}

// wantHeldAtMost fails when the replica held more than bound bytes, or read
// an endless body to its end.
func (fw *fakeWriter) wantHeldAtMost(bound int64) {
	fw.t.Helper()
	fw.t.Logf("the replica held at most %d bytes on disk (bound %d); the writer sent %d", fw.maxHeld.Load(), bound, fw.sent.Load())
	if held := fw.maxHeld.Load(); held > bound {
		fw.t.Errorf("the replica held %d bytes of the checkpoint on disk; the bound is %d", held, bound)
	}
	if sent := fw.sent.Load(); sent >= endlessGuard {
		fw.t.Errorf("the replica read %d bytes of an endless body", sent)
	}
}

type fakeSpace func() uint64

func (f fakeSpace) AvailableBytes() (uint64, error) { return f(), nil }

// endless writes zeros to w until a write fails or endlessGuard is reached.
func endless(w io.Writer, fw *fakeWriter) {
	zeros := make([]byte, 256<<10)
	for fw.sent.Load() < endlessGuard {
		if _, err := w.Write(zeros); err != nil {
			return
		}
	}
}

// realCheckpoint is the archive of a small real store, and its manifest.
func realCheckpoint(t *testing.T) ([]byte, Manifest) {
	t.Helper()
	dir, _ := testStore(t)
	buf, m := archive(t, dir)
	if len(m.Files) == 0 {
		t.Fatal("the checkpoint lists no files")
	}
	return buf.Bytes(), m
}

// writeEntry writes one tar entry of a header and data.
func writeEntry(tw *tar.Writer, name string, size int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func manifestJSON(t *testing.T, m Manifest) []byte {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// copyStoreFiles writes m's files from the real archive raw into tw.
func copyStoreFiles(t *testing.T, tw *tar.Writer, raw []byte, only func(name string) bool) error {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			t.Error(err)
			return err
		}
		if h.Name == manifestName || !only(h.Name) {
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := writeEntry(tw, h.Name, h.Size, data); err != nil {
			return err
		}
	}
}

func all(string) bool { return true }

// failures reads utxo_cache_replica_bootstrap_failures_total{reason}.
func failures(t *testing.T, m *TailMetrics, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.bootstrapFailures)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no bootstrap failures of reason %q", reason)
	return 0
}

// TestBootstrapRefusesAnOversizedManifest: a manifest whose header announces
// 10 GiB, followed by endless zeros, is refused at its header; nothing is
// written.
func TestBootstrapRefusesAnOversizedManifest(t *testing.T) {
	_, m := realCheckpoint(t)
	dst := filepath.Join(t.TempDir(), "store-1")
	var fw *fakeWriter
	fw = newFakeWriter(t, dst, m, func(w io.Writer) {
		tw := tar.NewWriter(w)
		if err := tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o644, Size: 10 << 30, Typeflag: tar.TypeReg}); err != nil {
			return
		}
		endless(tw, fw)
	})
	metrics := NewTailMetrics(nil)
	err := fw.bootstrapFrom(TailOptions{Metrics: metrics})
	fw.wantHeldAtMost(0)
	if !errors.Is(err, ErrBadArchive) || !strings.Contains(err.Error(), "manifest of 10737418240 bytes") {
		t.Fatalf("a 10 GiB manifest: %v, want ErrBadArchive naming its size", err)
	}
	if n := failures(t, metrics, "bad_archive"); n != 1 {
		t.Fatalf("bad_archive failures counted: %v, want 1", n)
	}
}

// TestBootstrapRefusesAnUnlistedFile: a file the manifest does not list is
// refused at its header, wherever it comes.
func TestBootstrapRefusesAnUnlistedFile(t *testing.T) {
	raw, m := realCheckpoint(t)
	for _, c := range []struct {
		name   string
		before func(string) bool // the listed files sent before the intruder
	}{
		{"first", func(string) bool { return false }},
		{"after the listed files", all},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "store-1")
			var fw *fakeWriter
			fw = newFakeWriter(t, dst, m, func(w io.Writer) {
				tw := tar.NewWriter(w)
				if writeEntry(tw, manifestName, int64(len(manifestJSON(t, m))), manifestJSON(t, m)) != nil ||
					copyStoreFiles(t, tw, raw, c.before) != nil {
					return
				}
				if tw.WriteHeader(&tar.Header{Name: "999999.sst", Mode: 0o644, Size: 1 << 40, Typeflag: tar.TypeReg}) == nil {
					endless(tw, fw)
				}
			})
			err := fw.bootstrapFrom(TailOptions{})
			bound := int64(0)
			if c.before("") {
				bound = m.StoreBytes()
			}
			fw.wantHeldAtMost(bound)
			if !errors.Is(err, ErrBadArchive) || !strings.Contains(err.Error(), `"999999.sst"`) {
				t.Fatalf("an unlisted file: %v, want ErrBadArchive naming it", err)
			}
		})
	}
}

// TestBootstrapRefusesAFileLargerThanListed: a listed file whose header
// claims more than the manifest lists is refused at its header; so is one
// that claims less (the rest of it would be read as headers).
func TestBootstrapRefusesAFileLargerThanListed(t *testing.T) {
	raw, m := realCheckpoint(t)
	big := 0 // the largest file: it is sent with a lying header
	for i, f := range m.Files {
		if f.Bytes > m.Files[big].Bytes {
			big = i
		}
	}
	var before int64 // the bytes of the files before it
	sent := map[string]bool{}
	for _, f := range m.Files[:big] {
		before += f.Bytes
		sent[f.Name] = true
	}
	for _, extra := range []int64{1 << 40, 1, -1} {
		t.Run(strconv.FormatInt(extra, 10), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "store-1")
			var fw *fakeWriter
			fw = newFakeWriter(t, dst, m, func(w io.Writer) {
				tw := tar.NewWriter(w)
				if writeEntry(tw, manifestName, int64(len(manifestJSON(t, m))), manifestJSON(t, m)) != nil ||
					copyStoreFiles(t, tw, raw, func(name string) bool { return sent[name] }) != nil {
					return
				}
				f := m.Files[big]
				if tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o644, Size: f.Bytes + extra, Typeflag: tar.TypeReg}) == nil {
					endless(tw, fw)
				}
			})
			err := fw.bootstrapFrom(TailOptions{})
			fw.wantHeldAtMost(before)
			if !errors.Is(err, ErrBadArchive) || !strings.Contains(err.Error(), "where the manifest lists") {
				t.Fatalf("a file of %+d bytes: %v, want ErrBadArchive", extra, err)
			}
		})
	}
}

// TestBootstrapRefusesWithoutRoom: a checkpoint whose declared size (the
// X-Checkpoint-Bytes header, or the manifest's list) leaves less than the
// bytes to keep free is refused before anything is written; an archive with
// no list (from before it) is bounded by the free space as it is written,
// and so is one that the disk fills up under from elsewhere.
func TestBootstrapRefusesWithoutRoom(t *testing.T) {
	raw, m := realCheckpoint(t)
	total := m.StoreBytes()
	const keep = 1 << 20

	t.Run("announced", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "store-1")
		fw := newFakeWriter(t, dst, m, func(w io.Writer) { _, _ = w.Write(raw) })
		fw.header.Set("X-Checkpoint-Bytes", strconv.FormatInt(total, 10))
		metrics := NewTailMetrics(nil)
		space := fakeSpace(func() uint64 { return uint64(total) + keep - 1 })
		err := fw.bootstrapFrom(TailOptions{Space: space, KeepFree: keep, Metrics: metrics})
		fw.wantHeldAtMost(0)
		if !errors.Is(err, ErrNoRoom) {
			t.Fatalf("announced %d bytes with room for %d: %v, want ErrNoRoom", total, total-1, err)
		}
		if n := failures(t, metrics, "insufficient_storage"); n != 1 {
			t.Fatalf("insufficient_storage failures counted: %v, want 1", n)
		}
		// With the room, the same checkpoint installs.
		dst = filepath.Join(t.TempDir(), "store-2")
		fw = newFakeWriter(t, dst, m, func(w io.Writer) { _, _ = w.Write(raw) })
		fw.header.Set("X-Checkpoint-Bytes", strconv.FormatInt(total, 10))
		space = fakeSpace(func() uint64 { return uint64(total) + keep - uint64(dirBytes(dst+".installing")) })
		if err := fw.bootstrapFrom(TailOptions{Space: space, KeepFree: keep}); err != nil {
			t.Fatalf("announced %d bytes with room for them: %v", total, err)
		}
	})

	t.Run("listed", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "store-1")
		fw := newFakeWriter(t, dst, m, func(w io.Writer) { _, _ = w.Write(raw) })
		space := fakeSpace(func() uint64 { return uint64(total) + keep - 1 })
		err := fw.bootstrapFrom(TailOptions{Space: space, KeepFree: keep})
		fw.wantHeldAtMost(0)
		if !errors.Is(err, ErrNoRoom) {
			t.Fatalf("listed %d bytes with room for %d: %v, want ErrNoRoom", total, total-1, err)
		}
	})

	t.Run("unlisted endless", func(t *testing.T) {
		// An archive from before the list: its manifest has none, then
		// 1 MiB files without end. The disk has 8 MiB beyond the bytes to
		// keep free, less what the replica wrote.
		const room = 8 << 20
		dst := filepath.Join(t.TempDir(), "store-1")
		legacy := m
		legacy.Files = nil
		var fw *fakeWriter
		fw = newFakeWriter(t, dst, m, func(w io.Writer) {
			tw := tar.NewWriter(w)
			raw := manifestJSON(t, legacy)
			if writeEntry(tw, manifestName, int64(len(raw)), raw) != nil {
				return
			}
			chunk := make([]byte, 1<<20)
			for i := 0; fw.sent.Load() < endlessGuard; i++ {
				if writeEntry(tw, strconv.Itoa(i)+".sst", int64(len(chunk)), chunk) != nil {
					return
				}
			}
		})
		space := fakeSpace(func() uint64 { return room + keep - uint64(dirBytes(dst+".installing")) })
		err := fw.bootstrapFrom(TailOptions{Space: space, KeepFree: keep})
		fw.wantHeldAtMost(room)
		if !errors.Is(err, ErrNoRoom) {
			t.Fatalf("endless files with 8 MiB of room: %v, want ErrNoRoom", err)
		}
	})

	t.Run("filled from elsewhere", func(t *testing.T) {
		// A listed archive with room for it when it starts; then something
		// else takes the room once the replica has written a first file.
		dst := filepath.Join(t.TempDir(), "store-1")
		fw := newFakeWriter(t, dst, m, func(w io.Writer) { _, _ = w.Write(raw) })
		space := fakeSpace(func() uint64 {
			held := uint64(dirBytes(dst + ".installing"))
			if held > 0 {
				return keep // the rest went to another program
			}
			return uint64(total) + keep
		})
		if err := fw.bootstrapFrom(TailOptions{Space: space, KeepFree: keep}); !errors.Is(err, ErrNoRoom) {
			t.Fatalf("a disk filled from elsewhere while writing: %v, want ErrNoRoom", err)
		}
	})
}

// TestBootstrapStalls: a writer that stops sending mid-stream is abandoned
// after the idle timeout, and nothing of its checkpoint is kept.
func TestBootstrapStalls(t *testing.T) {
	raw, m := realCheckpoint(t)
	dst := filepath.Join(t.TempDir(), "store-1")
	release := make(chan struct{})
	var fw *fakeWriter
	fw = newFakeWriter(t, dst, m, func(w io.Writer) {
		if _, err := w.Write(raw[:len(raw)/2]); err != nil {
			return
		}
		<-release // stalls until the test ends
	})
	t.Cleanup(func() { close(release) }) // before the server closes
	metrics := NewTailMetrics(nil)
	done := make(chan error, 1)
	go func() {
		done <- fw.bootstrapFrom(TailOptions{CheckpointIdleTimeout: 100 * time.Millisecond, Metrics: metrics})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "no byte from the writer for 100ms") {
			t.Fatalf("a stalled download: %v, want ErrStalled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a download stalled mid-stream was still waiting after 30s, with an idle timeout of 100ms")
	}
	fw.wantHeldAtMost(m.StoreBytes())
	if n := failures(t, metrics, "stalled"); n != 1 {
		t.Fatalf("stalled failures counted: %v, want 1", n)
	}
}

// lockedBuffer is a log destination safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBootstrapFromAnHonestWriter: the archive a writer streams, with its
// X-Checkpoint-Bytes, installs; the download logs its progress.
func TestBootstrapFromAnHonestWriter(t *testing.T) {
	raw, m := realCheckpoint(t)
	dst := filepath.Join(t.TempDir(), "store-1")
	fw := newFakeWriter(t, dst, m, func(w io.Writer) {
		for p := raw; len(p) > 0; p = p[min(len(p), 4096):] {
			if _, err := w.Write(p[:min(len(p), 4096)]); err != nil {
				return
			}
		}
	})
	fw.header.Set("X-Checkpoint-Bytes", strconv.FormatInt(m.StoreBytes(), 10))
	var logs lockedBuffer
	got, err := Bootstrap(context.Background(), TailOptions{URL: fw.url, Token: "t", CheckpointProgressInterval: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, dst, 1<<40, disk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(m) {
		t.Fatalf("installed %s, want %s", got, m)
	}
	want := `msg="downloading the writer's checkpoint" received_bytes=`
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "store_bytes="+strconv.FormatInt(m.StoreBytes(), 10)) {
		t.Fatalf("no progress logged (%q):\n%s", want, logs.String())
	}
	fw.wantHeldAtMost(m.StoreBytes())
}

// TestInstallArchiveWithoutFileList: a backup written before manifests
// listed their files still restores, and the manifest written now lists
// every store file with its size, in the order of the archive.
func TestInstallArchiveWithoutFileList(t *testing.T) {
	raw, m := realCheckpoint(t)
	var order []ArchiveFile
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, ArchiveFile{Name: h.Name, Bytes: h.Size})
	}
	if order[0].Name != manifestName || len(order) != len(m.Files)+1 {
		t.Fatalf("archive entries %v, manifest files %v", order, m.Files)
	}
	for i, f := range m.Files {
		if order[i+1] != f {
			t.Fatalf("entry %d is %+v, the manifest lists %+v", i+1, order[i+1], f)
		}
	}

	legacy := m
	legacy.Files = nil
	var old bytes.Buffer
	tw := tar.NewWriter(&old)
	if err := writeEntry(tw, manifestName, int64(len(manifestJSON(t, legacy))), manifestJSON(t, legacy)); err != nil {
		t.Fatal(err)
	}
	if err := copyStoreFiles(t, tw, raw, all); err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	if bytes.Contains(old.Bytes(), []byte(`"files"`)) {
		t.Fatal("the old-style archive has a file list")
	}
	dst := filepath.Join(t.TempDir(), "restored")
	got, err := Install(&old, dst, nil, 1<<40, disk.Options{}, nil)
	if err != nil {
		t.Fatalf("an archive without a file list: %v", err)
	}
	if !got.Equal(m) {
		t.Fatalf("installed %s, want %s", got, m)
	}
	if _, err := os.Stat(filepath.Join(dst, manifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the manifest is in the store: %v", err)
	}
}
