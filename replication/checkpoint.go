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
	"github.com/utxo-cache/utxo-cache/tiers/disk"
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

// Manifest is the state a checkpoint holds: what a restore verifies.
type Manifest struct {
	Seq       uint64       `json:"seq"`
	Tip       *tipJSON     `json:"tip"` // nil: the empty store
	UtxoCount uint64       `json:"utxo_count"`
	Digest    chain.Digest `json:"utxo_digest"`
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
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Checkpoint{Manifest: ManifestOf(st), dir: dir, release: func() {}}, nil
}

// Stream streams the checkpoint as a tar archive: the manifest first (so a
// reader of the stream knows the state before the store's files), then the
// store's files.
func (c *Checkpoint) Stream(w io.Writer) error {
	raw, err := json.Marshal(c.Manifest)
	if err != nil {
		return err
	}
	return writeTar(w, c.dir, memFile{name: manifestName, data: raw})
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
// by way of a temporary directory beside it: it opens the store there,
// checks its state against want (the HTTP headers; nil: the archive's own
// manifest, which must then be present and is checked anyway when both are),
// recounts the UTXO set from the outpoint rows, and only then renames it into
// place. Nothing is left at dir unless the store verified. maxBytes bounds the
// archive. opts are the options the store is opened with for verification.
func Install(r io.Reader, dir string, want *Manifest, maxBytes int64, opts disk.Options, stop func() bool) (Manifest, error) {
	if _, err := os.Stat(dir); err == nil {
		return Manifest{}, fmt.Errorf("install into %s: it already exists", dir)
	}
	tmp := dir + ".installing"
	if err := os.RemoveAll(tmp); err != nil {
		return Manifest{}, err
	}
	fail := func(err error) (Manifest, error) {
		_ = os.RemoveAll(tmp)
		return Manifest{}, err
	}
	if err := extractTar(r, tmp, maxBytes); err != nil {
		return fail(fmt.Errorf("extract checkpoint: %w", err))
	}
	var m Manifest
	raw, err := os.ReadFile(filepath.Join(tmp, manifestName))
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &m); err != nil {
			return fail(fmt.Errorf("checkpoint manifest: %v: %w", err, ErrBadArchive))
		}
		if want != nil && !m.Equal(*want) {
			return fail(fmt.Errorf("checkpoint manifest (%s) differs from the announced state (%s): %w", m, want, ErrMismatch))
		}
		if err := os.Remove(filepath.Join(tmp, manifestName)); err != nil {
			return fail(err)
		}
	case errors.Is(err, os.ErrNotExist) && want != nil:
		m = *want
	default:
		return fail(fmt.Errorf("checkpoint manifest: %v: %w", err, ErrBadArchive))
	}
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
	if err := os.Rename(tmp, dir); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return Manifest{}, err
	}
	return m, nil
}
