package storedir

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
)

// dataDir is the replica's data directory on a memFS.
const dataDir = "/data"

// storeFiles are the files of a test store; their content is derived from
// the store's name, so that a complete store is told from a partial one.
var storeFiles = []string{"000004.sst", "MANIFEST-000001", "OPTIONS-000003"}

// walFile is the file a serving store writes (its log).
const walFile = "000005.log"

func storeContent(name, file string) string {
	return fmt.Sprintf("%s/%s: %s", name, file, strings.Repeat("x", 16))
}

// life is one replica's life on a memFS, driven through the protocol: what
// it does, and which names CURRENT may hold if it crashed now.
type life struct {
	fs *memFS
	d  *Dir
	// allowed are the names CURRENT may hold after a crash now ("" none):
	// the store being served (none while bootstrapping or after Forget),
	// and, while SetCurrent or Forget is under way, what it leads to.
	allowed []string
	// phase names what the replica is doing, for messages and for lies
	// aimed at one operation.
	phase string
}

func (l *life) set(phase string, allowed ...string) { l.phase, l.allowed = phase, allowed }

// install does what replication.Install does on the data directory: it
// extracts the store into Installing(name) (any interrupted one removed
// first), syncs every file and the directory, reads it back (the
// verification), renames it to name and syncs the data directory.
func (l *life) install(name string) error {
	tmp := l.d.Path(Installing(name))
	if err := l.fs.RemoveAll(tmp); err != nil {
		return err
	}
	if err := l.fs.Mkdir(tmp); err != nil {
		return err
	}
	for _, file := range storeFiles {
		f, err := l.fs.Create(path.Join(tmp, file))
		if err != nil {
			return err
		}
		// Two writes: a crash can leave half a file.
		content := storeContent(name, file)
		_, err = f.Write([]byte(content[:len(content)/2]))
		if err == nil {
			_, err = f.Write([]byte(content[len(content)/2:]))
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := l.fs.SyncDir(tmp); err != nil {
		return err
	}
	if err := complete(l.fs, l.d.Path(Installing(name)), name); err != nil {
		return fmt.Errorf("verify %s: %w", name, err)
	}
	if err := l.fs.Rename(tmp, l.d.Path(name)); err != nil {
		return err
	}
	return l.fs.SyncDir(dataDir)
}

// complete checks that dir holds the store name, all of it (and maybe the
// log a served store writes).
func complete(m *memFS, dir, name string) error {
	entries, err := m.ReadDir(dir)
	if err != nil {
		return err
	}
	var got []string
	for _, e := range entries {
		if e.Name() != walFile {
			got = append(got, e.Name())
		}
	}
	if !slices.Equal(got, storeFiles) {
		return fmt.Errorf("%s holds %q, want %q", dir, got, storeFiles)
	}
	for _, file := range storeFiles {
		data, err := m.ReadFile(path.Join(dir, file))
		if err != nil {
			return err
		}
		if want := storeContent(name, file); string(data) != want {
			return fmt.Errorf("%s/%s holds %q, want %q", dir, file, data, want)
		}
	}
	return nil
}

// start is what a replica does when it starts: find its store, remove the
// others and any interrupted install.
func (l *life) start() (string, error) {
	name, err := l.d.Current()
	if err != nil {
		return "", err
	}
	return name, l.d.RemoveAllBut(name)
}

// takeOver installs name and makes it the served store; from is the store
// served until then ("" none).
func (l *life) takeOver(from, name string) error {
	l.set("install "+name, from)
	if err := l.install(name); err != nil {
		return err
	}
	l.set("SetCurrent("+name+")", from, name)
	if err := l.d.SetCurrent(name); err != nil {
		return err
	}
	// name serves from here on: a restart must not go back.
	l.set("RemoveAllBut("+name+")", name)
	if err := l.d.RemoveAllBut(name); err != nil {
		return err
	}
	l.set("serve "+name, name)
	return l.serve(name)
}

// serve is the store following its writer: Pebble writing its log, which
// a crash may leave in any state (complete ignores it).
func (l *life) serve(name string) error {
	f, err := l.fs.Create(path.Join(l.d.Path(name), walFile))
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("a change"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return l.fs.SyncDir(l.d.Path(name))
}

// run is the life under test, from a data directory left by an earlier
// replica (an interrupted install, a stale CURRENT.tmp): start, bootstrap
// store-1, serve it; store-1 diverges, so forget it and bootstrap store-2;
// store-2 falls behind the writer's retention (still the writer's: not
// forgotten), so bootstrap store-3 and replace it.
func (l *life) run() error {
	l.set("start", "")
	cur, err := l.start()
	if err != nil {
		return err
	}
	if cur != "" {
		return fmt.Errorf("a fresh data directory names %q", cur)
	}
	if err := l.takeOver("", "store-1"); err != nil {
		return err
	}
	l.set("Forget", "store-1", "")
	if err := l.d.Forget(); err != nil {
		return err
	}
	if err := l.takeOver("", "store-2"); err != nil {
		return err
	}
	return l.takeOver("store-2", "store-3")
}

// newLife returns a life on a new memFS holding, durably, a data directory
// with an interrupted install and a stale CURRENT.tmp.
func newLife(t testing.TB) *life {
	m := newMemFS()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Mkdir(dataDir))
	must(m.Mkdir(path.Join(dataDir, Installing("store-0"))))
	f, err := m.Create(path.Join(dataDir, Installing("store-0"), "000004.sst"))
	must(err)
	_, err = f.Write([]byte("half a file"))
	must(err)
	must(f.Sync())
	must(f.Close())
	f, err = m.Create(path.Join(dataDir, CurrentFile+".tmp"))
	must(err)
	_, err = f.Write([]byte("store-0.installing, half written and never renamed\n"))
	must(err)
	must(f.Sync())
	must(f.Close())
	must(m.SyncDir(path.Join(dataDir, Installing("store-0"))))
	must(m.SyncDir(dataDir))
	must(m.SyncDir("/"))
	m.steps = 0
	return &life{fs: m, d: New(m, dataDir)}
}

// check restarts a replica on a crashed file system and checks the
// protocol's promise: CURRENT names nothing or a complete store that a
// crash at that point may leave (never a partial store, never one replaced
// or forgotten before the crash); then the replica starts on it (and
// bootstraps when it has none) and the data directory holds that store
// only.
func check(image *memFS, allowed []string) error {
	l := &life{fs: image, d: New(image, dataDir)}
	name, err := l.d.Current()
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if !slices.Contains(allowed, name) {
		return fmt.Errorf("restart on %q; only %q may be current", name, allowed)
	}
	if name != "" {
		if err := complete(image, l.d.Path(name), name); err != nil {
			return fmt.Errorf("restart on %s, not complete: %w", name, err)
		}
	}
	if _, err := l.start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if name == "" {
		name = "store-9" // bootstrapped
		if err := l.takeOver("", name); err != nil {
			return fmt.Errorf("bootstrap after the restart: %w", err)
		}
	}
	if got, err := l.d.Current(); got != name || err != nil {
		return fmt.Errorf("after the restart CURRENT names %q (%v), want %q", got, err, name)
	}
	entries, err := image.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != CurrentFile && e.Name() != CurrentFile+".tmp" && e.Name() != name {
			return fmt.Errorf("after the restart the data directory still holds %s", e.Name())
		}
	}
	return nil
}

// crashEverywhere runs the life once to count its steps, then once per
// step k (0 to the count), crashing before its k-th change (k = the count:
// after the last), and checks the restart after a power cut and after a
// killed process. It returns the count, how often each outcome was seen,
// and the failures, each with its step and phase.
func crashEverywhere(t *testing.T, lie func(l *life, op, name string) bool) (steps int, outcomes map[string]int, failures []string) {
	count := newLife(t)
	if err := count.run(); err != nil {
		t.Fatalf("the life without a crash: %v\n%s", err, count.fs.tree())
	}
	steps = count.fs.steps
	outcomes = map[string]int{}
	for k := 0; k <= steps; k++ {
		l := newLife(t)
		l.fs.crashAt = k
		if lie != nil {
			l.fs.lie = func(op, name string) bool { return lie(l, op, name) }
		}
		var allowed []string
		var phase string
		l.fs.onCrash = func() { allowed, phase = slices.Clone(l.allowed), l.phase }
		err := l.run()
		switch {
		case k < steps && !errors.Is(err, errCrashed):
			t.Fatalf("step %d: the life did not crash: %v", k, err)
		case k == steps && err != nil:
			t.Fatalf("step %d: %v", k, err)
		case k == steps:
			allowed, phase = slices.Clone(l.allowed), "the end"
		}
		for _, c := range []struct {
			kind  string
			image *memFS
		}{{"power cut", l.fs.powerCutImage()}, {"killed", l.fs.processKillImage()}} {
			before := c.image.tree()
			name, _ := New(c.image, dataDir).Current()
			if err := check(c.image, allowed); err != nil {
				failures = append(failures, fmt.Sprintf("%s before step %d (in %s): %v\ndata directory at the restart:\n%s",
					c.kind, k, phase, err, before))
				continue
			}
			if name == "" {
				name = "a bootstrap"
			}
			outcomes[c.kind+": restart on "+name]++
		}
	}
	return steps, outcomes, failures
}

// TestCrashAtEveryStep crashes a replica's data directory before each
// change of its life (see life.run), on a file system that keeps only what
// was synced (a power cut) or everything (a killed process), and checks the
// restart (see check).
func TestCrashAtEveryStep(t *testing.T) {
	steps, outcomes, failures := crashEverywhere(t, nil)
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("crashed before each of %d steps, and after the last: %v", steps, outcomes)
	// Guard against a vacuous pass: every kind of restart was seen.
	for _, want := range []string{"a bootstrap", "store-1", "store-2", "store-3"} {
		if outcomes["power cut: restart on "+want] == 0 {
			t.Errorf("no power cut restarted on %s", want)
		}
	}
}

// TestCrashCatchesAMissingSync removes one sync of the protocol (the file
// system reports it done and does not do it) and checks that
// TestCrashAtEveryStep's checks then fail: the test can see each sync
// SetCurrent and Forget rely on.
func TestCrashCatchesAMissingSync(t *testing.T) {
	for _, c := range []struct {
		name string
		lie  func(l *life, op, name string) bool
	}{
		{"SetCurrent without the file's sync", func(l *life, op, name string) bool {
			return op == "sync" && name == path.Join(dataDir, CurrentFile+".tmp")
		}},
		{"SetCurrent without the directory's sync", func(l *life, op, name string) bool {
			return op == "syncdir" && name == dataDir && strings.HasPrefix(l.phase, "SetCurrent")
		}},
		{"Forget without the directory's sync", func(l *life, op, name string) bool {
			return op == "syncdir" && name == dataDir && l.phase == "Forget"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, failures := crashEverywhere(t, c.lie)
			if len(failures) == 0 {
				t.Fatal("no crash found the missing sync")
			}
			t.Logf("%d failures; the first: %s", len(failures), failures[0])
		})
	}
}
