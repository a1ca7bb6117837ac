package replication

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/utxo-cache/utxo-cache/internal/durable"
)

// ErrBadArchive marks a checkpoint archive that is not one this package
// wrote: a path that leaves the directory, a non-regular file, a size over
// the limit, an entry its manifest does not declare, a truncated stream.
var ErrBadArchive = errors.New("replication: bad checkpoint archive")

// ErrNoRoom marks a checkpoint that the file system it is installed on has
// no room for: writing it would leave less free than the install keeps.
var ErrNoRoom = errors.New("replication: no room for the checkpoint")

// Bounds of an archive's entries, whatever its headers say.
const (
	// maxManifestBytes bounds the manifest entry, which is read into
	// memory (never written to disk). A manifest is a few hundred bytes
	// plus about 40 per store file: 4 MiB lists over 100,000 files.
	maxManifestBytes = 4 << 20
	// maxArchiveFiles bounds the store files of an archive: a store of
	// several TiB, at Pebble's file sizes.
	maxArchiveFiles = 1 << 16
	// spaceCheckBytes is how much is written between two checks of the
	// free space while a file is extracted.
	spaceCheckBytes = 4 << 20
)

// memFile is an archive entry held in memory (the manifest).
type memFile struct {
	name string
	data []byte
}

// listFiles lists the regular files of dir (a Pebble checkpoint: flat, no
// subdirectories) with their sizes, by name.
func listFiles(dir string) ([]ArchiveFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := make([]ArchiveFile, 0, len(entries))
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("checkpoint %s: %s is not a regular file", dir, e.Name())
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		files = append(files, ArchiveFile{Name: e.Name(), Bytes: fi.Size()})
	}
	return files, nil
}

// writeTar streams first, then files of dir, in that order, as a tar
// archive to w. A file whose size is not the listed one fails it.
func writeTar(w io.Writer, dir string, first memFile, files []ArchiveFile) error {
	tw := tar.NewWriter(w)
	h := &tar.Header{Name: first.name, Mode: 0o644, Size: int64(len(first.data)), ModTime: time.Now(), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := tw.Write(first.data); err != nil {
		return err
	}
	for _, f := range files {
		if err := addFile(tw, filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, path string, want ArchiveFile) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != want.Bytes {
		return fmt.Errorf("%s is %d bytes, listed as %d", want.Name, fi.Size(), want.Bytes)
	}
	if err := tw.WriteHeader(&tar.Header{Name: want.Name, Mode: 0o644, Size: want.Bytes, ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != want.Bytes {
		err = fmt.Errorf("%s changed size while archived", want.Name)
	}
	return err
}

// extractLimits bound an extraction.
type extractLimits struct {
	// maxBytes bounds the store files in all.
	maxBytes int64
	// announced is the store files' bytes as announced before the archive
	// (X-Checkpoint-Bytes); negative: not announced.
	announced int64
	// room checks the free space; nil: not checked.
	room *room
}

// room is the free-space rule of an install: a write of n more bytes needs
// n + keepFree available. Checked before anything is written and while
// writing, so that a disk filling up from elsewhere also stops it.
type room struct {
	space    DiskSpace
	keepFree uint64
}

// check fails with ErrNoRoom unless need more bytes leave keepFree.
func (r *room) check(need int64) error {
	if r == nil {
		return nil
	}
	avail, err := r.space.AvailableBytes()
	if err != nil {
		return fmt.Errorf("free space: %w", err)
	}
	if avail < r.keepFree || avail-r.keepFree < uint64(max(need, 0)) {
		return fmt.Errorf("%w: %d bytes available, %d to write and %d to keep free", ErrNoRoom, avail, need, r.keepFree)
	}
	return nil
}

// extraction is one archive being written into a directory.
type extraction struct {
	dir string
	lim extractLimits
	// budget is the store files' bytes declared (the manifest's list, or
	// else the announced total); negative: none declared.
	budget  int64
	written int64 // store files' bytes written so far
	files   []ArchiveFile
	next    int // index in files of the next entry; files nil: not declared
	count   int // entries written
}

// extractTar writes the archive r into dir (created; it must not exist),
// refusing anything but flat regular files, and bounding every entry by
// what it can be:
//
//   - a first entry named manifestName is the manifest: at most
//     maxManifestBytes, parsed, checked against want (when not nil), and
//     kept in memory; it is returned, and found reports it;
//   - with a file list in the manifest, the entries after it must be those
//     files, in order, at their sizes, and nothing else;
//   - without one, entries are bounded by lim.maxBytes, lim.announced and
//     maxArchiveFiles in all;
//   - the declared total (list or announced) is checked against lim.room
//     before any store file is written, and every entry again before and
//     while it is written.
//
// Every file and dir are synced: a store installed from dir survives a
// crash. An error from r itself (a stalled or broken download) is returned
// as it is, not as ErrBadArchive.
func extractTar(r io.Reader, dir string, want *Manifest, lim extractLimits) (m Manifest, found bool, err error) {
	x := &extraction{dir: dir, lim: lim, budget: lim.announced}
	if lim.announced >= 0 {
		if lim.announced > lim.maxBytes {
			return m, false, fmt.Errorf("announced %d bytes, over the %d accepted: %w", lim.announced, lim.maxBytes, ErrBadArchive)
		}
		if err := lim.room.check(lim.announced); err != nil {
			return m, false, err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return m, false, err
	}
	src := &stickyReader{r: r}
	tr := tar.NewReader(src)
	for first := true; ; first = false {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, found, src.blame(fmt.Errorf("%v: %w", err, ErrBadArchive))
		}
		if first && h.Name == manifestName {
			if m, err = x.manifest(tr, h, want); err != nil {
				return m, false, src.blame(err)
			}
			found = true
			continue
		}
		if err := x.entry(tr, h); err != nil {
			return m, found, src.blame(err)
		}
	}
	if x.files != nil && x.next < len(x.files) {
		return m, found, fmt.Errorf("archive ends after %d of its %d files: %w", x.next, len(x.files), ErrBadArchive)
	}
	return m, found, durable.SyncDir(dir)
}

// manifest reads the manifest entry, checks it, and plans the extraction
// by its file list.
func (x *extraction) manifest(tr *tar.Reader, h *tar.Header, want *Manifest) (Manifest, error) {
	var m Manifest
	if h.Typeflag != tar.TypeReg || h.Size < 0 || h.Size > maxManifestBytes {
		return m, fmt.Errorf("manifest of %d bytes (at most %d): %w", h.Size, maxManifestBytes, ErrBadArchive)
	}
	raw, err := io.ReadAll(tr)
	if err != nil {
		return m, fmt.Errorf("checkpoint manifest: %v: %w", err, ErrBadArchive)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("checkpoint manifest: %v: %w", err, ErrBadArchive)
	}
	if want != nil && !m.Equal(*want) {
		return m, fmt.Errorf("checkpoint manifest (%s) differs from the announced state (%s): %w", m, want, ErrMismatch)
	}
	if m.Files == nil {
		return m, nil // an archive from before the list
	}
	if len(m.Files) > maxArchiveFiles {
		return m, fmt.Errorf("manifest lists %d files (at most %d): %w", len(m.Files), maxArchiveFiles, ErrBadArchive)
	}
	seen := make(map[string]bool, len(m.Files))
	var total int64
	for _, f := range m.Files {
		if !validName(f.Name) || f.Name == manifestName || seen[f.Name] || f.Bytes < 0 || f.Bytes > x.lim.maxBytes-total {
			return m, fmt.Errorf("manifest lists %q of %d bytes (%d listed before it, at most %d in all): %w",
				f.Name, f.Bytes, total, x.lim.maxBytes, ErrBadArchive)
		}
		seen[f.Name] = true
		total += f.Bytes
	}
	if x.lim.announced >= 0 && total != x.lim.announced {
		return m, fmt.Errorf("manifest lists %d bytes of files, %d were announced: %w", total, x.lim.announced, ErrBadArchive)
	}
	if err := x.lim.room.check(total); err != nil {
		return m, err
	}
	x.files, x.budget = m.Files, total
	return m, nil
}

// entry checks one store file's header against the plan, then writes it.
func (x *extraction) entry(tr *tar.Reader, h *tar.Header) error {
	if h.Typeflag != tar.TypeReg || !validName(h.Name) || h.Name == manifestName {
		return fmt.Errorf("entry %q (type %c): %w", h.Name, h.Typeflag, ErrBadArchive)
	}
	switch {
	case x.files != nil:
		if x.next == len(x.files) {
			return fmt.Errorf("entry %q after the %d files the manifest lists: %w", h.Name, len(x.files), ErrBadArchive)
		}
		if f := x.files[x.next]; h.Name != f.Name || h.Size != f.Bytes {
			return fmt.Errorf("entry %q of %d bytes where the manifest lists %q of %d: %w", h.Name, h.Size, f.Name, f.Bytes, ErrBadArchive)
		}
		x.next++
	case h.Size < 0 || h.Size > x.lim.maxBytes-x.written:
		return fmt.Errorf("archive over %d bytes: %w", x.lim.maxBytes, ErrBadArchive)
	case x.budget >= 0 && h.Size > x.budget-x.written:
		return fmt.Errorf("archive over the %d bytes announced: %w", x.budget, ErrBadArchive)
	case x.count == maxArchiveFiles:
		return fmt.Errorf("archive over %d files: %w", maxArchiveFiles, ErrBadArchive)
	}
	x.count++
	return x.writeFile(filepath.Join(x.dir, h.Name), tr, h.Size)
}

// need is what is left to write: the rest of the declared total, or else
// the rest of the current file (left of it).
func (x *extraction) need(left int64) int64 {
	if x.budget >= 0 {
		return x.budget - x.written
	}
	return left
}

// writeFile writes size bytes of r to the new file path, checking the free
// space before and every spaceCheckBytes, and syncs it.
func (x *extraction) writeFile(path string, r io.Reader, size int64) error {
	if err := x.lim.room.check(x.need(size)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return durable.SyncClose(f, x.copy(f, r, size))
}

func (x *extraction) copy(f *os.File, r io.Reader, size int64) error {
	for left := size; left > 0; {
		n, err := io.CopyN(f, r, min(left, spaceCheckBytes))
		x.written += n
		left -= n
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s: %d of %d bytes: %w", filepath.Base(f.Name()), size-left, size, ErrBadArchive)
		}
		if err != nil {
			return err
		}
		if left > 0 {
			if err := x.lim.room.check(x.need(left)); err != nil {
				return err
			}
		}
	}
	return nil
}

// validName reports whether name is a plain file name of the directory.
func validName(name string) bool {
	return name != "" && name == filepath.Base(name) && !strings.HasPrefix(name, ".")
}

// stickyReader keeps the first error of its reader other than io.EOF, so
// that a failed download is told from a malformed archive.
type stickyReader struct {
	r   io.Reader
	err error
}

func (s *stickyReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// blame returns the reader's own error when it had one (a stalled or
// broken download, whatever the tar reader made of it), else err.
func (s *stickyReader) blame(err error) error {
	if s.err != nil {
		return s.err
	}
	return err
}
