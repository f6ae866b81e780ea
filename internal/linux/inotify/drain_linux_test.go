package inotify

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDrain(t *testing.T) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	defer unix.Close(fd)
	dir := t.TempDir()
	wd, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "bb", "ccc"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	// The smallest buffer allowed: one event a read.
	buf := make([]byte, MaxEventSize)
	if err := Drain(fd, buf, func(e Event) {
		if e.Wd == int32(wd) && e.Mask&unix.IN_CREATE != 0 {
			got = append(got, e.Name)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(names) {
		t.Fatalf("got %q, want %q", got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("got %q, want %q", got, names)
		}
	}
	// Empty now: a second drain finds nothing and does not block.
	if err := Drain(fd, buf, func(e Event) { t.Errorf("unexpected event %+v", e) }); err != nil {
		t.Fatal(err)
	}
	if err := Drain(fd, buf[:MaxEventSize-1], func(Event) {}); err == nil {
		t.Fatal("a buffer short of one event was taken")
	}
}
