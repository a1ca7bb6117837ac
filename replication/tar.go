package replication

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrBadArchive marks a checkpoint archive that is not one this package
// wrote: a path that leaves the directory, a non-regular file, a size over
// the limit, a truncated stream.
var ErrBadArchive = errors.New("replication: bad checkpoint archive")

// memFile is an archive entry held in memory (the manifest).
type memFile struct {
	name string
	data []byte
}

// writeTar streams first, then the regular files of dir (a Pebble
// checkpoint: flat, no subdirectories), as a tar archive to w.
func writeTar(w io.Writer, dir string, first ...memFile) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	now := time.Now()
	for _, f := range first {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: now, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if slices.ContainsFunc(first, func(f memFile) bool { return f.name == e.Name() }) {
			continue
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("checkpoint %s: %s is not a regular file", dir, e.Name())
		}
		if err := addFile(tw, filepath.Join(dir, e.Name()), e.Name()); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != fi.Size() {
		err = fmt.Errorf("%s changed size while archived", name)
	}
	return err
}

// extractTar writes the archive r into dir (created; it must not exist),
// refusing anything but flat regular files and more than maxBytes in all.
// Every file and dir are synced: a store installed from dir survives a
// crash.
func extractTar(r io.Reader, dir string, maxBytes int64) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%v: %w", err, ErrBadArchive)
		}
		name := h.Name
		if h.Typeflag != tar.TypeReg || name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("entry %q (type %c): %w", name, h.Typeflag, ErrBadArchive)
		}
		if total += h.Size; h.Size < 0 || total > maxBytes {
			return fmt.Errorf("archive over %d bytes: %w", maxBytes, ErrBadArchive)
		}
		if err := writeFileSynced(filepath.Join(dir, name), tr, h.Size); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

func writeFileSynced(path string, r io.Reader, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d of %d bytes: %w", filepath.Base(path), n, size, ErrBadArchive)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
