package stage

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestProcPPid(t *testing.T) {
	// A command name with spaces and parentheses must not shift the
	// fields: stat is parsed from the last ')'.
	cmd := exec.Command("/bin/sh", "-c", `printf 'a) 7 (b' > /proc/self/comm; sleep 5; :`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for i := 0; i < 500; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); strings.HasPrefix(string(b), "a) 7") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ppid, err := procPPid(cmd.Process.Pid)
	if err != nil || ppid != os.Getpid() {
		t.Errorf("procPPid = %d, %v; want %d", ppid, err, os.Getpid())
	}
	if _, err := procPPid(-1); err == nil {
		t.Error("procPPid(-1) succeeded")
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/sys/fs/cgroup`: "/sys/fs/cgroup",
		`/mnt/a\040b`:    "/mnt/a b",
		`/x\134y`:        `/x\y`,
		`/trailing\04`:   `/trailing\04`,
		`/not\999octal`:  `/not\999octal`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStartTimeNamesAProcess(t *testing.T) {
	a, err := startTime(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("startTime(self) = %d, %v", a, err)
	}
	if b, _ := startTime(os.Getpid()); b != a {
		t.Errorf("start time changed: %d then %d", a, b)
	}
}
