package loadtest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// copyStore copies the closed store at src into dst, which must not exist,
// file by file, and returns the bytes copied. A closed Pebble store is a
// plain directory, so a copy opens as the same store; hard links would not
// do, because Pebble rewrites files in place (it recycles write-ahead logs
// and appends to the MANIFEST). Every file and directory is synced before
// copyStore returns, so the kernel's write-back of the copy does not spill
// into the configuration that runs on it. Anything but regular files and
// directories (a symlink, a socket) is refused: no store holds one.
func copyStore(src, dst string) (int64, error) {
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("loadtest: copy store: %s already exists", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	var total int64
	var dirs []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, to)
			return os.Mkdir(to, 0o755)
		case d.Type().IsRegular():
			n, err := copyFile(path, to)
			total += n
			return err
		}
		return fmt.Errorf("%s is neither a file nor a directory (%s)", path, d.Type())
	})
	// Children before parents: a directory's entries are durable once the
	// directory itself is synced.
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = syncPath(dirs[i])
	}
	if err != nil {
		return total, fmt.Errorf("loadtest: copy store %s: %w", src, err)
	}
	return total, nil
}

func copyFile(from, to string) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
