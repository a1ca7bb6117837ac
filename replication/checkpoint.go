package replication

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/diskspace"
	"github.com/utxo-cache/utxo-cache/internal/durable"
	"github.com/utxo-cache/utxo-cache/replication/storedir"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

// ErrBusy is returned by Source.Checkpoint and Source.OpenChanges when as
// many answers of the kind as SourceOptions allow are already being written.
var ErrBusy = errors.New("replication: too many in progress, retry later")

// ErrMismatch marks a store whose figures are not those it was announced
// with (a checkpoint's headers or manifest, a change's after figures).
var ErrMismatch = errors.New("replication: store does not match the expected state")

// manifestName is the file a checkpoint archive carries first: the figures
// of the state it holds, so an archive on disk (a backup) is verifiable
// without the HTTP headers that come with a streamed one.
const manifestName = "UTXO-CACHE-CHECKPOINT.json"

// Manifest is the state a checkpoint holds: what a restore verifies, and
// the files that hold it: what an extraction accepts.
//
// # The file list
//
// Files names the store's files the archive carries after the manifest, in
// the order it carries them, each with its size. An extraction takes those
// entries and nothing else: an entry out of order or not listed, a size
// other than the listed one, anything after the last listed file, all
// refuse the archive before a byte of it is written. So the manifest, which
// comes first, bounds what the archive can write, and that bound (the sum
// of the sizes) is checked against the free space before anything is
// written. Archives written before the list existed have none (Files nil);
// their extraction is bounded by the free space alone (see Install).
// Readers that do not know the list ignore it: it changes no other field.
type Manifest struct {
	Seq       uint64       `json:"seq"`
	Tip       *tipJSON     `json:"tip"` // nil: the empty store
	UtxoCount uint64       `json:"utxo_count"`
	Digest    chain.Digest `json:"utxo_digest"`
	// Files are the archive's store files in order; nil: not declared
	// (an archive from before the list). Equal and Matches ignore them.
	Files []ArchiveFile `json:"files,omitempty"`
}

// ArchiveFile is one store file of a checkpoint archive.
type ArchiveFile struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// StoreBytes is the sum of the sizes of Files: the bytes the archive's store
// files take on disk.
func (m Manifest) StoreBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return n
}

type tipJSON struct {
	Height uint64 `json:"height"`
	Hash   string `json:"hash"`
}

// ManifestOf describes st.
func ManifestOf(st disk.State) Manifest {
	m := Manifest{Seq: st.Seq, UtxoCount: st.UtxoCount, Digest: st.Digest}
	if !st.Tip.Empty {
		m.Tip = &tipJSON{Height: st.Tip.Height, Hash: st.Tip.Hash.String()}
	}
	return m
}

// Matches reports whether st has the manifest's figures.
func (m Manifest) Matches(st disk.State) bool { return m.Equal(ManifestOf(st)) }

// Equal reports whether m and o name the same state.
func (m Manifest) Equal(o Manifest) bool {
	if (m.Tip == nil) != (o.Tip == nil) || (m.Tip != nil && *m.Tip != *o.Tip) {
		return false
	}
	return m.Seq == o.Seq && m.UtxoCount == o.UtxoCount && m.Digest == o.Digest
}

func (m Manifest) String() string {
	tip := "empty"
	if m.Tip != nil {
		tip = fmt.Sprintf("%d/%s", m.Tip.Height, m.Tip.Hash)
	}
	return fmt.Sprintf("seq %d, tip %s, %d UTXOs, digest %s", m.Seq, tip, m.UtxoCount, m.Digest)
}

// A checkpointer writes a consistent copy of a store at a published state
// into a new directory: the writer (writer.Writer.Checkpoint, between two
// changes), or a store no writer uses (disk.Store.Checkpoint, offline).
type checkpointer interface {
	Checkpoint(ctx context.Context, dir string) (disk.State, error)
}

// Checkpoint is a checkpoint staged on disk, ready to stream. Close removes
// it.
type Checkpoint struct {
	Manifest Manifest
	dir      string
	release  func()
}

// Take stages a checkpoint of c in a new directory under staging (created
// if missing; on the store's file system, so Pebble hard-links its files).
func Take(ctx context.Context, c checkpointer, staging string) (*Checkpoint, error) {
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint staging: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(staging, "checkpoint-"+hex.EncodeToString(rnd[:]))
	st, err := c.Checkpoint(ctx, dir)
	if err == nil {
		m := ManifestOf(st)
		if m.Files, err = listFiles(dir); err == nil {
			return &Checkpoint{Manifest: m, dir: dir, release: func() {}}, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// Stream streams the checkpoint as a tar archive: the manifest first (so a
// reader of the stream knows the state and the files before the store's
// files), then the store's files, in the manifest's order.
func (c *Checkpoint) Stream(w io.Writer) error {
	raw, err := json.Marshal(c.Manifest)
	if err != nil {
		return err
	}
	return writeTar(w, c.dir, memFile{name: manifestName, data: raw}, c.Manifest.Files)
}

// Close removes the staged files.
func (c *Checkpoint) Close() error {
	defer c.release()
	return os.RemoveAll(c.dir)
}

// storeCheckpointer adapts a store no writer uses.
type storeCheckpointer struct{ s *disk.Store }

func (s storeCheckpointer) Checkpoint(_ context.Context, dir string) (disk.State, error) {
	return s.s.Checkpoint(dir)
}

// TakeOffline stages a checkpoint of a store that no writer uses (the
// operator's `checkpoint` command).
func TakeOffline(s *disk.Store, staging string) (*Checkpoint, error) {
	return Take(context.Background(), storeCheckpointer{s}, staging)
}

// Install extracts the checkpoint archive r into dir (which must not exist),
// by way of a temporary directory beside it (storedir.Installing(dir),
// replaced if an interrupted install left one): it opens the store there,
// checks its state against want (the HTTP headers; nil: the archive's own
// manifest, which must then be present and is checked anyway when both are),
// recounts the UTXO set from the outpoint rows, and only then renames it into
// place and syncs dir's parent. Nothing is left at dir unless the store
// verified; a refused archive is removed at once. opts are the options the
// store is opened with for verification.
//
// What it writes is bounded, whatever the archive claims: maxBytes in all;
// the sizes the manifest lists (see Manifest), checked against the free
// space before anything is written; and the free-space rule throughout (it
// keeps KeepFree of dir's file system free, and fails with ErrNoRoom before
// it would write into that), which alone bounds an archive from before the
// file list.
func Install(r io.Reader, dir string, want *Manifest, maxBytes int64, opts disk.Options, stop func() bool) (Manifest, error) {
	return install(r, dir, installOptions{want: want, maxBytes: maxBytes, announced: -1, store: opts, stop: stop})
}

// DiskSpace is the free space of the file system a checkpoint is installed
// on (diskspace.Dir).
type DiskSpace interface {
	AvailableBytes() (uint64, error)
}

// KeepFree is the free space an install leaves on a file system of
// totalBytes for a store opened with opts: the writer's default reserve for
// its memtable (what the store needs to open and take changes:
// writer.DefaultReserve) plus the default ballast of that file system (the
// room a writer holds back for a full disk: diskspace.DefaultBallastBytes).
func KeepFree(totalBytes uint64, opts disk.Options) uint64 {
	return writer.DefaultReserve(opts.EnsureDefaults().MemTableBytes) + diskspace.DefaultBallastBytes(totalBytes)
}

// installOptions are Install's, and Bootstrap's additions.
type installOptions struct {
	want      *Manifest
	maxBytes  int64
	announced int64 // the store files' bytes announced before the archive; negative: none
	store     disk.Options
	stop      func() bool
	// space and keepFree are the free-space rule; space nil: dir's file
	// system (unchecked where the platform cannot tell); keepFree 0:
	// KeepFree of it.
	space    DiskSpace
	keepFree uint64
	// extracted, when set, is called once the archive is read (before the
	// store is verified).
	extracted func()
}

// room resolves the free-space rule of an install into dir.
func (o installOptions) room(dir string) (*room, error) {
	if o.space != nil {
		return &room{space: o.space, keepFree: o.keepFree}, nil
	}
	parent := filepath.Dir(dir)
	u, err := diskspace.UsageOf(parent)
	if errors.Is(err, diskspace.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keep := o.keepFree
	if keep == 0 {
		keep = KeepFree(u.Total, o.store)
	}
	return &room{space: diskspace.Dir(parent), keepFree: keep}, nil
}

func install(r io.Reader, dir string, o installOptions) (Manifest, error) {
	if _, err := os.Stat(dir); err == nil {
		return Manifest{}, fmt.Errorf("install into %s: it already exists", dir)
	}
	rm, err := o.room(dir)
	if err != nil {
		return Manifest{}, err
	}
	tmp := storedir.Installing(dir)
	if err := os.RemoveAll(tmp); err != nil {
		return Manifest{}, err
	}
	fail := func(err error) (Manifest, error) {
		_ = os.RemoveAll(tmp)
		return Manifest{}, err
	}
	m, found, err := extractTar(r, tmp, o.want, extractLimits{maxBytes: o.maxBytes, announced: o.announced, room: rm})
	if o.extracted != nil {
		o.extracted()
	}
	switch {
	case err != nil:
		return fail(fmt.Errorf("extract checkpoint: %w", err))
	case !found && o.want != nil:
		m = *o.want
	case !found:
		return fail(fmt.Errorf("checkpoint manifest: the archive has none: %w", ErrBadArchive))
	}
	m.Files = nil
	opts, stop := o.store, o.stop
	opts.Logger = nil
	opts.ReturnCorruption = true // a damaged archive is refused, not a crash
	s, err := disk.Open(tmp, opts)
	if err != nil {
		return fail(fmt.Errorf("open the checkpoint: %w", err))
	}
	st := s.Published()
	count, digest, err := s.Recount(stop)
	_ = s.Close()
	switch {
	case err != nil:
		return fail(fmt.Errorf("recount the checkpoint: %w", err))
	case !m.Matches(st):
		return fail(fmt.Errorf("checkpoint holds %s, announced %s: %w", ManifestOf(st), m, ErrMismatch))
	case count != st.UtxoCount || digest != st.Digest:
		return fail(fmt.Errorf("checkpoint's outputs recount to %d UTXOs, digest %s; its state says %d, %s: %w",
			count, digest, st.UtxoCount, st.Digest, ErrMismatch))
	}
	if err := durable.Rename(tmp, dir); err != nil {
		return fail(err)
	}
	return m, nil
}
