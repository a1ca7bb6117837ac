package storedir

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// errCrashed is what every call of a crashed memFS returns.
var errCrashed = errors.New("memfs: crashed")

// memFS is a crashable in-memory file system: it keeps, beside what a
// process sees, what a power cut would leave, and crashes before its k-th
// change when told to.
//
// A file's data is durable as of its last Sync; a directory's entries (the
// names created, renamed and removed in it, each pointing at its node) as
// of its last SyncDir. A crash keeps, from the root down, the durable
// entries of each directory and the durable data of each file
// (powerCutImage), or everything (processKillImage: the page cache
// survives a killed process).
//
// Every change is one step: Create, each Write, each Sync, Rename, Remove,
// Mkdir, SyncDir, and each name RemoveAll unlinks (a crash can stop it
// half way). Reads are not steps. Paths are absolute and slash-separated.
//
// lie, when set, is asked before each sync (op "sync" with the file's
// path, "syncdir" with the directory's): true skips it while reporting
// success, which is how a test removes one sync from the code under test.
//
// A memFS is used by one goroutine.
type memFS struct {
	root    *memNode
	steps   int // changes done so far
	crashAt int // crash before the change of this index; -1: never
	crashed bool
	onCrash func() // called when it crashes, before anything fails
	lie     func(op, name string) bool
}

type memNode struct {
	dir bool
	// A file's data, and what of it a power cut keeps.
	data, synced []byte
	// A directory's entries, and what of them a power cut keeps.
	children, durable map[string]*memNode
	modTime           time.Time
}

func newDirNode() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

func newMemFS() *memFS { return &memFS{root: newDirNode(), crashAt: -1} }

// step is called before each change: it fails the change, and every call
// after it, from the crash point on.
func (m *memFS) step() error {
	if m.crashed {
		return errCrashed
	}
	if m.steps == m.crashAt {
		m.crashed = true
		if m.onCrash != nil {
			m.onCrash()
		}
		return errCrashed
	}
	m.steps++
	return nil
}

// read is called before each read.
func (m *memFS) read() error {
	if m.crashed {
		return errCrashed
	}
	return nil
}

// powerCutImage returns a new memFS holding what a power cut now leaves.
func (m *memFS) powerCutImage() *memFS {
	return &memFS{root: m.root.image(true), crashAt: -1}
}

// processKillImage returns a new memFS holding everything as it is now.
func (m *memFS) processKillImage() *memFS {
	return &memFS{root: m.root.image(false), crashAt: -1}
}

func (n *memNode) image(durableOnly bool) *memNode {
	if !n.dir {
		data := n.data
		if durableOnly {
			data = n.synced
		}
		return &memNode{data: slices.Clone(data), synced: slices.Clone(data), modTime: n.modTime}
	}
	entries := n.children
	if durableOnly {
		entries = n.durable
	}
	c := newDirNode()
	for name, child := range entries {
		ci := child.image(durableOnly)
		c.children[name], c.durable[name] = ci, ci
	}
	return c
}

// split returns the parent directory of name and its base name.
func (m *memFS) split(op, name string) (*memNode, string, error) {
	name = path.Clean(name)
	dir, base := path.Split(name)
	parent, err := m.lookup(op, dir)
	if err != nil {
		return nil, "", err
	}
	if !parent.dir {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: errors.New("not a directory")}
	}
	return parent, base, nil
}

func (m *memFS) lookup(op, name string) (*memNode, error) {
	n := m.root
	for _, part := range strings.Split(strings.Trim(path.Clean(name), "/"), "/") {
		if part == "" {
			continue
		}
		if !n.dir {
			return nil, &fs.PathError{Op: op, Path: name, Err: errors.New("not a directory")}
		}
		if n = n.children[part]; n == nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
	}
	return n, nil
}

func (m *memFS) Create(name string) (File, error) {
	if err := m.step(); err != nil {
		return nil, err
	}
	parent, base, err := m.split("create", name)
	if err != nil {
		return nil, err
	}
	n := parent.children[base]
	switch {
	case n == nil:
		n = &memNode{}
		parent.children[base] = n
	case n.dir:
		return nil, &fs.PathError{Op: "create", Path: name, Err: errors.New("is a directory")}
	default:
		n.data = nil // truncated, durably only once synced
	}
	n.modTime = time.Now()
	return &memFile{fs: m, n: n, name: path.Clean(name)}, nil
}

// Mkdir creates the directory name (test helpers only: Dir never creates
// a directory).
func (m *memFS) Mkdir(name string) error {
	if err := m.step(); err != nil {
		return err
	}
	parent, base, err := m.split("mkdir", name)
	if err != nil {
		return err
	}
	if parent.children[base] != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	parent.children[base] = newDirNode()
	return nil
}

func (m *memFS) ReadFile(name string) ([]byte, error) {
	if err := m.read(); err != nil {
		return nil, err
	}
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return slices.Clone(n.data), nil
}

func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	if err := m.read(); err != nil {
		return nil, err
	}
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return memInfo{name: path.Base(path.Clean(name)), n: n}, nil
}

func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := m.read(); err != nil {
		return nil, err
	}
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	var entries []fs.DirEntry
	for _, child := range slices.Sorted(maps.Keys(n.children)) {
		entries = append(entries, fs.FileInfoToDirEntry(memInfo{name: child, n: n.children[child]}))
	}
	return entries, nil
}

func (m *memFS) Rename(oldname, newname string) error {
	if err := m.step(); err != nil {
		return err
	}
	oldParent, oldBase, err := m.split("rename", oldname)
	if err != nil {
		return err
	}
	n := oldParent.children[oldBase]
	if n == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	newParent, newBase, err := m.split("rename", newname)
	if err != nil {
		return err
	}
	// As rename(2): a file replaces a file, a directory an empty one.
	if old := newParent.children[newBase]; old != nil && (old.dir != n.dir || old.dir && len(old.children) > 0) {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrExist}
	}
	delete(oldParent.children, oldBase)
	newParent.children[newBase] = n
	return nil
}

func (m *memFS) Remove(name string) error {
	if err := m.step(); err != nil {
		return err
	}
	parent, base, err := m.split("remove", name)
	if err != nil {
		return err
	}
	n := parent.children[base]
	switch {
	case n == nil:
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	case n.dir && len(n.children) > 0:
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(parent.children, base)
	return nil
}

// RemoveAll removes name and what it holds, one name at a time, depth
// first: a step each.
func (m *memFS) RemoveAll(name string) error {
	if err := m.read(); err != nil {
		return err
	}
	n, err := m.lookup("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.dir {
		for _, child := range slices.Sorted(maps.Keys(n.children)) {
			if err := m.RemoveAll(path.Join(name, child)); err != nil {
				return err
			}
		}
	}
	return m.Remove(name)
}

func (m *memFS) SyncDir(name string) error {
	if err := m.step(); err != nil {
		return err
	}
	n, err := m.lookup("open", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: errors.New("not a directory")}
	}
	if m.lie != nil && m.lie("syncdir", path.Clean(name)) {
		return nil
	}
	n.durable = maps.Clone(n.children)
	return nil
}

type memFile struct {
	fs     *memFS
	n      *memNode
	name   string
	closed bool
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.closed {
		return 0, fs.ErrClosed
	}
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	f.n.data = append(f.n.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if f.closed {
		return fs.ErrClosed
	}
	if err := f.fs.step(); err != nil {
		return err
	}
	if f.fs.lie != nil && f.fs.lie("sync", f.name) {
		return nil
	}
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Close() error {
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	n    *memNode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.n.data)) }
func (i memInfo) ModTime() time.Time { return i.n.modTime }
func (i memInfo) IsDir() bool        { return i.n.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// tree lists what m holds, one path a line, for failure messages.
func (m *memFS) tree() string {
	var b strings.Builder
	var walk func(string, *memNode)
	walk = func(p string, n *memNode) {
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c := n.children[name]
			if c.dir {
				fmt.Fprintf(&b, "%s/\n", path.Join(p, name))
				walk(path.Join(p, name), c)
			} else {
				fmt.Fprintf(&b, "%s %q\n", path.Join(p, name), c.data)
			}
		}
	}
	walk("/", m.root)
	return b.String()
}
