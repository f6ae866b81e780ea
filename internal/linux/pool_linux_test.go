package linux

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st.Ino
}

func absent(t *testing.T, path, when string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("%s: %s is there (%v)", when, path, err)
	}
}

// A pooled run's placeholders are gone from their names when it releases
// them, and the next run's are the same inodes, renamed back (with their
// records, so that a run of the same state directory joining one knows it
// for agentbox's); the pool's Close leaves nothing.
func TestPoolKeepsPlaceholdersOffTheHost(t *testing.T) {
	root, state := placeholderDirs(t)
	pool := NewPool(state)
	if pool == nil {
		t.Fatal("no pool")
	}
	dir, file := filepath.Join(root, ".claude"), filepath.Join(root, ".mcp.json")
	held := []HeldDir{{Path: dir, Root: root, Missing: true}, {Path: file, Root: root, Missing: true, File: true}}
	var ino [2]uint64
	for i := range 3 {
		p, err := AcquirePooled(held, state, pool)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]uint64{inodeOf(t, dir), inodeOf(t, file)}; i > 0 && got != ino {
			t.Errorf("run %d: inodes %v, want the pooled %v", i, got, ino)
		} else {
			ino = got
		}
		if fi, _ := os.Lstat(file); fi == nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			t.Errorf("run %d: %s is %v, want an empty file", i, file, fi)
		}
		if got := RecordedPlaceholders(state); len(got) != 2 {
			t.Errorf("run %d: records %v, want both", i, got)
		}
		p.Release()
		absent(t, dir, "after the release")
		absent(t, file, "after the release")
	}
	pool.Close()
	if ents, _ := os.ReadDir(filepath.Join(state, poolDirName)); len(ents) != 0 {
		t.Errorf("the closed pool left %v", ents)
	}
}

// A placeholder another run still holds when the pooled run releases it
// stays for that run, which removes it as the last one out; one the user
// wrote into meanwhile is theirs and stays; a placeholder on another
// filesystem than the pool's is made and removed as without a pool.
func TestPoolSharedWrittenOtherFS(t *testing.T) {
	root, state := placeholderDirs(t)
	pool := NewPool(state)
	defer pool.Close()
	path := filepath.Join(root, ".codex")
	a, err := AcquirePooled(missing(root, path), state, pool)
	if err != nil {
		t.Fatal(err)
	}
	releaseShared(t, a, missing(root, path), state, path)
	if len(pool.spares) != 0 {
		t.Errorf("pooled a placeholder another run removed: %v", pool.spares)
	}

	a, err = AcquirePooled(missing(root, path), state, pool)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o755)
	if err := os.WriteFile(filepath.Join(path, "mine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.Release()
	if _, err := os.Stat(filepath.Join(path, "mine")); err != nil {
		t.Errorf("the user's file in a placeholder: %v", err)
	}
	os.RemoveAll(path)

	shm, err := os.MkdirTemp("/dev/shm", "agentbox-pool-")
	if err != nil {
		t.Skip("no /dev/shm")
	}
	defer os.RemoveAll(shm)
	if pool.sameDev(dirID(mustOpen(t, shm))) {
		t.Skip("/dev/shm is on the state directory's filesystem")
	}
	other := filepath.Join(shm, ".codex")
	n := len(pool.spares)
	b, err := AcquirePooled(missing(shm, other), state, pool)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	absent(t, other, "on another filesystem, after the release")
	if len(pool.spares) != n {
		t.Errorf("pooled a placeholder of another filesystem")
	}
}

func mustOpen(t *testing.T, dir string) int {
	t.Helper()
	fd, err := openParent(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// A pool whose owner died (its lock gone, its placeholders left) is
// removed by the next sweep; a live one is not.
func TestSweepDeadPool(t *testing.T) {
	root, state := placeholderDirs(t)
	live, dead := NewPool(state), NewPool(state)
	defer live.Close()
	for _, pl := range []*Pool{live, dead} {
		p, err := AcquirePooled(missing(root, filepath.Join(root, ".zed")), state, pl)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	}
	if len(live.spares) != 1 || len(dead.spares) != 1 {
		t.Fatalf("spares %d and %d, want one each", len(live.spares), len(dead.spares))
	}
	unix.Close(dead.fd) // dies: its lock goes with it
	SweepPlaceholders(state)
	if _, err := os.Stat(dead.dir); !os.IsNotExist(err) {
		t.Errorf("the dead pool %s is still there: %v", dead.dir, err)
	}
	if _, err := os.Stat(filepath.Join(live.dir, live.spares[0].name)); err != nil {
		t.Errorf("the live pool's placeholder was swept: %v", err)
	}
}
