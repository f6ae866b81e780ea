package linux

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func placeholderDirs(t *testing.T) (root, state string) {
	t.Helper()
	d := t.TempDir()
	root, state = filepath.Join(d, "root"), filepath.Join(d, "state")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, state
}

func missing(root, path string) []HeldDir { return []HeldDir{{Path: path, Root: root, Missing: true}} }

// releaseShared has a second run acquire held while a holds it, then
// releases a (the placeholder at path must stay: the second run holds it)
// and the second (the last run out removes it).
func releaseShared(t *testing.T, a *Placeholders, held []HeldDir, state, path string) {
	t.Helper()
	b, err := AcquirePlaceholders(held, state)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("removed while another run holds it: %v", err)
	}
	b.Release()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("left behind by the last run out: %v", err)
	}
}

func TestPlaceholderLifecycle(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, ".codex")
	// A umask stricter than 022 must not leave the placeholder closed to
	// other users' runs.
	old := syscall.Umask(0o077)
	a, err := AcquirePlaceholders(missing(root, path), state)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o555 {
		t.Fatalf("placeholder: %v %v, want a 0555 directory", fi, err)
	}
	if got := RecordedPlaceholders(state); !slices.Equal(got, []string{path}) {
		t.Errorf("records = %v", got)
	}
	releaseShared(t, a, missing(root, path), state, path)
	if got := RecordedPlaceholders(state); len(got) != 0 {
		t.Errorf("records left: %v", got)
	}
}

// A path git reads as a file gets an empty 0444 file, shared and removed
// like a directory placeholder; a killed run's file is swept; a file the
// user wrote into meanwhile is theirs and stays; a FIFO swapped in at the
// name is refused without being opened for reading.
func TestPlaceholderFile(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, ".gitconfig")
	held := []HeldDir{{Path: path, Root: root, Missing: true, File: true}}
	old := syscall.Umask(0o077)
	a, err := AcquirePlaceholders(held, state)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o444 || fi.Size() != 0 {
		t.Fatalf("placeholder: %v %v, want an empty 0444 file", fi, err)
	}
	releaseShared(t, a, held, state, path)

	// Killed: the hold is gone with the process, the record stays.
	c, err := AcquirePlaceholders(held, state)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range c.held {
		h.f.Close()
	}
	if got := SweepPlaceholders(state); !slices.Equal(got, []string{path}) {
		t.Errorf("sweep removed %v, want the file", got)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("swept file still there: %v", err)
	}

	// Written into by the user during the run: kept.
	d, err := AcquirePlaceholders(held, state)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	os.WriteFile(path, []byte("[user]\n"), 0o644)
	d.Release()
	if b, err := os.ReadFile(path); err != nil || string(b) != "[user]\n" {
		t.Errorf("user's content lost: %q %v", b, err)
	}
	if got := RecordedPlaceholders(state); len(got) != 0 {
		t.Errorf("a file the user wrote is still recorded as a placeholder: %v", got)
	}
	os.Remove(path)

	// A FIFO at the name: refused, no hang.
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := AcquirePlaceholders(held, state); err == nil {
		e.Release()
		t.Fatal("a FIFO at a file placeholder's name was accepted")
	}
}

// A directory the user made is held, never removed, whatever is on it.
func TestPlaceholderUserDirKept(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, ".agents")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	// The mark older versions trusted; any command can set it.
	syscall.Setxattr(path, "user.agentbox", []byte("placeholder"), 0)
	p, err := AcquirePlaceholders([]HeldDir{{Path: path, Root: root}}, state)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	SweepPlaceholders(state)
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("user's directory: %v %v, want it kept as it was", fi, err)
	}
}

// killedRun acquires path's placeholder as a run killed then would leave
// it: the descriptors gone with the process, the record kept.
func killedRun(t *testing.T, root, path, state string) {
	t.Helper()
	p, err := AcquirePlaceholders(missing(root, path), state)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range p.held {
		h.f.Close()
		syscall.Close(h.parent)
	}
}

// A record outliving its placeholder (removed by someone else, the name
// reused by the user) does not make the user's directory agentbox's.
func TestPlaceholderStaleRecord(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, ".git")
	killedRun(t, root, path, state)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o555); err != nil {
		t.Fatal(err)
	}
	if got := SweepPlaceholders(state); len(got) != 0 {
		t.Errorf("swept %v", got)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("user's directory removed: %v", err)
	}
	if got := RecordedPlaceholders(state); len(got) != 0 {
		t.Errorf("stale record kept: %v", got)
	}
}

func TestPlaceholderSweepKilledRun(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, ".git")
	killedRun(t, root, path, state)
	if got := SweepPlaceholders(state); !slices.Equal(got, []string{path}) {
		t.Errorf("swept %v, want %v", got, []string{path})
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("placeholder left: %v", err)
	}
}

// A symlink in place of the parent, or of the name, is never followed.
func TestPlaceholderSymlinks(t *testing.T) {
	root, state := placeholderDirs(t)
	victim := filepath.Join(filepath.Dir(root), "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(root, ".codex")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(root, "via")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(root, ".codex"), filepath.Join(root, "via", ".codex")} {
		if _, err := AcquirePlaceholders(missing(root, path), state); err == nil {
			t.Errorf("%s: acquired through a symlink", path)
		}
	}
	if fi, _ := os.Lstat(victim); fi.Mode().Perm() != 0o700 {
		t.Errorf("victim mode changed: %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("created in the victim: %v", ents)
	}
}

func TestDecodeRecord(t *testing.T) {
	id := identity{1, 2, 3, 4}
	path, got, ok := decodeRecord(encodeRecord("/a\nb c", id))
	if !ok || path != "/a\nb c" || got != id {
		t.Errorf("round trip: %q %v %v", path, got, ok)
	}
	for _, bad := range []string{"", "/tmp/x", "1 2 3\n/x", "a b c d\n/x", "1 2 3 4 5\n/x"} {
		if _, _, ok := decodeRecord([]byte(bad)); ok {
			t.Errorf("decodeRecord(%q) accepted", bad)
		}
	}
}

// Another run's placeholder for an ancestor changes what is missing: gone
// since the policy was resolved, the ancestor gets the placeholder; still
// standing empty and unwritable, it is held instead.
func TestPlaceholderAncestor(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, ".config", "agentbox")
	p, err := AcquirePlaceholders(missing(root, path), state)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Paths(); !slices.Equal(got, []string{filepath.Dir(path)}) {
		t.Errorf("held %v, want the missing parent", got)
	}
	if os.Geteuid() == 0 {
		// Root writes into a 0555 directory regardless.
		p.Release()
		return
	}
	q, err := AcquirePlaceholders(missing(root, path), state)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Paths(); !slices.Equal(got, []string{filepath.Dir(path)}) {
		t.Errorf("held %v, want the other run's placeholder for the parent", got)
	}
	p.Release()
	q.Release()
	if _, err := os.Lstat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("placeholder left: %v", err)
	}
}

// adopt changes only a directory that looks like the one mkdirat just
// made: what a racing command swaps in is refused otherwise.
func TestPlaceholderAdopt(t *testing.T) {
	root, state := placeholderDirs(t)
	p := &Placeholders{dir: state}
	os.MkdirAll(state, 0o700)
	open := func(name string, mode os.FileMode, files ...string) *os.File {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			os.WriteFile(filepath.Join(d, f), nil, 0o600)
		}
		os.Chmod(d, mode)
		f, err := os.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close(); os.Chmod(d, 0o700) })
		return f
	}
	now := time.Now()
	for _, c := range []struct {
		name  string
		f     *os.File
		made  time.Time
		adopt bool
	}{
		{"fresh", open("fresh", 0o555), now, true},
		{"fresh, umask 077", open("umask", 0o500), now, true},
		{"more bits than asked for", open("wide", 0o755), now, false},
		{"older than the mkdir", open("old", 0o555), now.Add(time.Hour), false},
		{"not empty", open("full", 0o555, "x"), now, false},
	} {
		if got := p.adopt(c.f, c.f.Name(), c.made, false); got != c.adopt {
			t.Errorf("%s: adopt = %v, want %v", c.name, got, c.adopt)
		}
		fi, _ := c.f.Stat()
		if c.adopt && fi.Mode().Perm() != 0o555 {
			t.Errorf("%s: mode %v after adopt, want 0555", c.name, fi.Mode())
		}
		if !c.adopt && p.recorded(c.f.Name(), c.f) {
			t.Errorf("%s: recorded though refused", c.name)
		}
	}
}

// An existing directory the policy saw can be gone with its parent by the
// time it is held (both were another run's placeholders, as root may
// create below a 0555 one): then the missing ancestor is what is held, not
// an error for every run of the race.
func TestPlaceholderExistingParentGone(t *testing.T) {
	root, state := placeholderDirs(t)
	path := filepath.Join(root, "home", ".config", "agentbox")
	if err := os.MkdirAll(filepath.Join(root, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The policy found path existing; it is gone, .config with it.
	p, err := AcquirePlaceholders([]HeldDir{{Path: path, Root: root}}, state)
	if err != nil {
		t.Fatalf("holding a directory whose parent vanished: %v", err)
	}
	defer p.Release()
	if got := p.Paths(); !slices.Equal(got, []string{filepath.Join(root, "home", ".config")}) {
		t.Errorf("held %v, want the missing ancestor", got)
	}
}
