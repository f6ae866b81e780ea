package stage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

const (
	wallsProbeEnv = "AGENTBOX_TEST_WALLS_PROBE"
	// signalProbeEnv: "pid tid" to signal with 0, from a child of the
	// probe's restricted thread.
	signalProbeEnv = "AGENTBOX_TEST_SIGNAL_PROBE"
)

// TestLandlockWalls: landlockWalls, as the init runs it after
// setNoNewPrivs, leaves every thread of the process unable to write
// outside the writable roots (the init's own threads, which the command
// cannot observe), and gives the calling thread, the one the command is
// forked from, a domain of its own, scoped for signals: a process forked
// from it (the command) can signal that thread but none of the others.
func TestLandlockWalls(t *testing.T) {
	if v := os.Getenv(signalProbeEnv); v != "" {
		var pid, tid int
		fmt.Sscan(v, &pid, &tid)
		if err := unix.Tgkill(pid, tid, 0); err != nil {
			fmt.Println("signal:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	abi, err := landlock.ABI()
	if err != nil || abi < landlock.DefaultMinABI {
		t.Skipf("Landlock unusable here: ABI %d, %v", abi, err)
	}
	if base := os.Getenv(wallsProbeEnv); base != "" {
		wallsProbe(t, base, abi >= 6)
		return
	}
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "rw"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLandlockWalls$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), wallsProbeEnv+"="+base)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	} else {
		t.Logf("probe:\n%s", out)
	}
}

func wallsProbe(t *testing.T, base string, scoped bool) {
	runtime.LockOSThread()
	jobs := make(chan func())
	tidc := make(chan int)
	go func() {
		runtime.LockOSThread()
		tidc <- unix.Gettid()
		for j := range jobs {
			j()
		}
	}()
	otherTid := <-tidc
	onOther := func(f func()) {
		done := make(chan struct{})
		jobs <- func() { f(); close(done) }
		<-done
	}
	rw := filepath.Join(base, "rw")
	if err := setNoNewPrivs(); err != nil {
		t.Fatal(err)
	}
	if err := landlockWalls(&spec.Spec{Walls: spec.Walls{WritableRoots: []string{rw}}}); err != nil {
		t.Fatal(err)
	}
	create := func(p string) error { return os.WriteFile(p, nil, 0o644) }
	if err := create(filepath.Join(base, "main")); !errorsIs(err, syscall.EACCES) {
		t.Errorf("create outside the roots on the command's thread: %v, want EACCES", err)
	}
	if err := create(filepath.Join(rw, "main")); err != nil {
		t.Errorf("create inside the roots on the command's thread: %v", err)
	}
	var otherErr error
	onOther(func() { otherErr = create(filepath.Join(base, "other")) })
	if !errorsIs(otherErr, syscall.EACCES) {
		t.Errorf("create outside the roots on another thread: %v, want EACCES", otherErr)
	}
	if !scoped {
		t.Log("Landlock ABI below 6: no signal scoping to check")
		return
	}
	pid, me := unix.Getpid(), unix.Gettid()
	signal := func(tid int) error {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLandlockWalls$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", signalProbeEnv, pid, tid))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := signal(otherTid); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
		t.Errorf("a child of the command's thread signalled another thread: %v, want EPERM", err)
	}
	if err := signal(me); err != nil {
		t.Errorf("a child of the command's thread cannot signal that thread: %v", err)
	}
	close(jobs)
}

func errorsIs(err error, want syscall.Errno) bool {
	e, ok := err.(*os.PathError)
	if ok {
		err = e.Err
	}
	return err == want
}

func TestReleaseAtLeast(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"6.18.44-fc-v1098", true}, {"5.5.0", true}, {"5.4.250-generic", false},
		{"4.19.0", false}, {"5.10", true}, {"garbage", false}, {"", false},
	} {
		if got := releaseAtLeast(c.rel, 5, 5); got != c.want {
			t.Errorf("releaseAtLeast(%q, 5, 5) = %v, want %v", c.rel, got, c.want)
		}
	}
}
