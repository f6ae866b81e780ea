package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
	if after := count(); after > before {
		t.Errorf("%d descriptors open after 5 more runs, %d before", after, before)
	}
}
