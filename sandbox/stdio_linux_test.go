package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRelayLeavesNoDescriptors: relayed host files (a FIFO as stdin, a
// file opened without O_APPEND as stdout) cost no descriptors once Wait
// returns, run after run, and the output arrives.
func TestRelayLeavesNoDescriptors(t *testing.T) {
	pol, _ := testPolicy(t)
	outside := t.TempDir()
	fifo := filepath.Join(outside, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		return len(ents)
	}
	run := func() {
		out, err := os.Create(filepath.Join(outside, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		in, err := os.OpenFile(fifo, os.O_RDWR, 0) // never at EOF
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		in.WriteString("yyyyy")
		c := Command(pol, "sh", "-c", "head -c 5; echo done >&2")
		c.Stdin, c.Stdout, c.Stderr = in, out, out
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out.Name())
		if string(b) != "yyyyydone\n" {
			t.Fatalf("output %q", b)
		}
	}
	run()
	before := count()
	for range 5 {
		run()
	}
	// Descriptors of the runtime and of other goroutines come and go
	// (the netpoller, a relay goroutine closing its end as it returns):
	// a leak is one that never goes back, so give them a moment.
	after := count()
	for deadline := time.Now().Add(2 * time.Second); after > before && time.Now().Before(deadline); after = count() {
		time.Sleep(20 * time.Millisecond)
	}
	if after > before {
		t.Errorf("%d descriptors open after 5 more runs, %d before", after, before)
	}
}
