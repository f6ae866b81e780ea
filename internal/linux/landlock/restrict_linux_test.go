package landlock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Landlock cannot be lifted once applied, so every test that restricts
// runs in a fresh copy of the test binary. subprocEnv carries the name
// of the test to run there; the parent passes paths in other variables
// and checks the exit status.
const subprocEnv = "AGENTBOX_LANDLOCK_TEST_SUBPROCESS"

// isSubprocess reports whether the calling test runs in its subprocess.
func isSubprocess(t *testing.T) bool {
	return os.Getenv(subprocEnv) == t.Name()
}

// runSubprocess runs the calling test again in a subprocess with extra
// environment and forwards a skip or a failure.
func runSubprocess(t *testing.T, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), subprocEnv+"="+t.Name()), env...)
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP"):
		t.Skipf("skipped in subprocess:\n%s", out)
	case err != nil:
		t.Fatalf("subprocess %v failed: %v\n%s", env, err, out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("subprocess %v did not run the test:\n%s", env, out)
	}
	t.Logf("subprocess %v:\n%s", env, out)
}

func requireABI(t *testing.T, want int) int {
	t.Helper()
	v, err := ABI()
	if err != nil {
		t.Skipf("landlock unavailable: %v", err)
	}
	if v < want {
		t.Skipf("needs Landlock ABI %d, kernel offers %d", want, v)
	}
	return v
}

func wantErrno(t *testing.T, what string, err error, want ...syscall.Errno) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	t.Errorf("%s: got %v, want %v", what, err, want)
}

func TestRestrictFilesystem(t *testing.T) {
	abi := requireABI(t, DefaultMinABI)
	if !isSubprocess(t) {
		base := t.TempDir()
		for _, d := range []string{"rw", "ro"} {
			if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(base, "ro", "f"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, "single"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		runSubprocess(t, "TEST_BASE="+base)
		// Seen from outside the sandbox: nothing outside the roots
		// changed, and the file root was written.
		if b, err := os.ReadFile(filepath.Join(base, "ro", "f")); err != nil || string(b) != "hello" {
			t.Errorf("outside file changed: %q, %v", b, err)
		}
		if b, err := os.ReadFile(filepath.Join(base, "single")); err != nil || string(b) != "y" {
			t.Errorf("file root not written: %q, %v", b, err)
		}
		return
	}
	base := os.Getenv("TEST_BASE")
	rw, ro, single := filepath.Join(base, "rw"), filepath.Join(base, "ro"), filepath.Join(base, "single")

	applied, err := Restrict(Config{WritableRoots: []string{rw, single}})
	if err != nil {
		t.Fatalf("Restrict: %v", err)
	}
	t.Logf("applied: %v", applied)
	if applied.ABI != abi {
		t.Errorf("applied ABI %d, probe said %d", applied.ABI, abi)
	}

	// Inside the writable root: the full set of operations a build does.
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	must("create in root", os.WriteFile(filepath.Join(rw, "new"), []byte("x"), 0o644))
	must("mkdir in root", os.Mkdir(filepath.Join(rw, "d"), 0o755))
	must("rename across dirs in root", os.Rename(filepath.Join(rw, "new"), filepath.Join(rw, "d", "new")))
	must("symlink in root", os.Symlink("d/new", filepath.Join(rw, "link")))
	must("truncate in root", os.Truncate(filepath.Join(rw, "d", "new"), 0))
	must("remove in root", os.RemoveAll(filepath.Join(rw, "d")))
	must("write file root", os.WriteFile(single, []byte("y"), 0o644))
	must("write /dev/null", os.WriteFile("/dev/null", []byte("z"), 0))

	// Outside: readable, not writable.
	if b, err := os.ReadFile(filepath.Join(ro, "f")); err != nil || string(b) != "hello" {
		t.Errorf("read outside: %q, %v", b, err)
	}
	if _, err := os.ReadDir(ro); err != nil {
		t.Errorf("list outside: %v", err)
	}
	_, err = os.OpenFile(filepath.Join(ro, "f"), os.O_WRONLY, 0)
	wantErrno(t, "open outside for writing", err, syscall.EACCES)
	wantErrno(t, "create outside", os.WriteFile(filepath.Join(ro, "g"), nil, 0o644), syscall.EACCES)
	wantErrno(t, "mkdir outside", os.Mkdir(filepath.Join(ro, "d"), 0o755), syscall.EACCES)
	wantErrno(t, "remove outside", os.Remove(filepath.Join(ro, "f")), syscall.EACCES)
	wantErrno(t, "truncate outside", os.Truncate(filepath.Join(ro, "f"), 0), syscall.EACCES)
	wantErrno(t, "create next to file root", os.WriteFile(filepath.Join(base, "sibling"), nil, 0o644), syscall.EACCES)
	// The file root itself cannot be removed: that needs a right on
	// its parent directory.
	wantErrno(t, "remove file root", os.Remove(single), syscall.EACCES)
	// A hard link from outside into the root would make an outside file
	// writable through a path under the root; refer forbids it.
	wantErrno(t, "link outside file into root", os.Link(filepath.Join(ro, "f"), filepath.Join(rw, "l")), syscall.EXDEV, syscall.EACCES)
	must("write root file", os.WriteFile(filepath.Join(rw, "m"), []byte("m"), 0o644))
	wantErrno(t, "move file out of root", os.Rename(filepath.Join(rw, "m"), filepath.Join(ro, "m")), syscall.EXDEV, syscall.EACCES)

	// Children inherit the domain; a shell's everyday redirections work.
	script := fmt.Sprintf(`echo ok >/dev/null && echo x >%s/from-sh && ! (echo y >%s/from-sh) 2>/dev/null`, rw, ro)
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("sh: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ro, "from-sh")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sh wrote outside the roots: %v", err)
	}
}

func TestScopeAbstractUnix(t *testing.T) {
	requireABI(t, 6)
	if !isSubprocess(t) {
		// The parent, outside any Landlock domain, serves an abstract
		// socket; the child tries to reach it with and without the scope.
		name := fmt.Sprintf("@agentbox-landlock-test-%d", os.Getpid())
		ln, err := net.Listen("unix", name)
		if err != nil {
			t.Fatalf("listen %s: %v", name, err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		runSubprocess(t, "TEST_SOCKET="+name, "TEST_SCOPED=1")
		runSubprocess(t, "TEST_SOCKET="+name, "TEST_SCOPED=0")
		return
	}
	scoped := os.Getenv("TEST_SCOPED") == "1"
	if _, err := Restrict(Config{ScopeAbstractUnix: scoped}); err != nil {
		t.Fatalf("Restrict: %v", err)
	}
	c, err := net.Dial("unix", os.Getenv("TEST_SOCKET"))
	if scoped {
		wantErrno(t, "connect to the parent's abstract socket", err, syscall.EPERM)
	} else if err != nil {
		t.Errorf("control run without the scope: connect: %v", err)
	}
	if c != nil {
		c.Close()
	}

	// Sockets created inside the domain stay usable.
	inner := fmt.Sprintf("@agentbox-landlock-inner-%d", os.Getpid())
	ln, err := net.Listen("unix", inner)
	if err != nil {
		t.Fatalf("listen inside: %v", err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err = net.Dial("unix", inner)
	if err != nil {
		t.Errorf("connect to a socket inside the domain: %v", err)
	} else {
		c.Close()
	}
}

func TestScopeSignals(t *testing.T) {
	requireABI(t, 6)
	if !isSubprocess(t) {
		runSubprocess(t, "TEST_SCOPED=1")
		runSubprocess(t, "TEST_SCOPED=0")
		return
	}
	scoped := os.Getenv("TEST_SCOPED") == "1"
	if _, err := Restrict(Config{ScopeSignals: scoped}); err != nil {
		t.Fatalf("Restrict: %v", err)
	}
	// Signal 0 checks permission without delivering anything.
	err := syscall.Kill(os.Getppid(), 0)
	if scoped {
		wantErrno(t, "signal the parent", err, syscall.EPERM)
	} else if err != nil {
		t.Errorf("control run without the scope: signal the parent: %v", err)
	}
	if err := syscall.Kill(os.Getpid(), 0); err != nil {
		t.Errorf("signal self: %v", err)
	}
}

// TestRestrictRefusesBelowFloor asks for more than any kernel offers.
// It runs in a subprocess in case the refusal is ever broken and the
// restriction applied.
func TestRestrictRefusesBelowFloor(t *testing.T) {
	v := requireABI(t, 1)
	if !isSubprocess(t) {
		runSubprocess(t)
		return
	}
	_, err := Restrict(Config{MinABI: maxKnownABI + 1})
	if err == nil {
		t.Fatal("Restrict succeeded with an impossible floor")
	}
	if v < maxKnownABI {
		_, err = Restrict(Config{MinABI: v + 1})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("kernel offers ABI %d, policy needs at least %d", v, v+1)) {
			t.Fatalf("floor %d on ABI %d: %v", v+1, v, err)
		}
		t.Logf("refused as expected: %v", err)
	}
	// Nothing was enforced: writing anywhere still works.
	if err := os.WriteFile(filepath.Join(os.TempDir(), fmt.Sprintf("agentbox-ll-%d", os.Getpid())), nil, 0o600); err != nil {
		t.Errorf("write after refused Restrict: %v", err)
	}
	os.Remove(filepath.Join(os.TempDir(), fmt.Sprintf("agentbox-ll-%d", os.Getpid())))
}

func TestABI(t *testing.T) {
	v, err := ABI()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("error %v does not wrap ErrUnavailable", err)
		}
		t.Skipf("landlock unavailable: %v", err)
	}
	if v < 1 || v > maxKnownABI {
		t.Errorf("ABI %d outside 1..%d", v, maxKnownABI)
	}
	t.Logf("Landlock ABI %d", v)
}

// TestRestrictThreads: a ThisThread restriction holds on the calling
// thread and what it forks, and nowhere else in the process: the sandbox's
// init forks the command from that thread while its other threads serve
// the command. A restriction of every thread (enforced through psx,
// without go-landlock) holds on each, and on threads made afterwards.
func TestRestrictThreads(t *testing.T) {
	requireABI(t, DefaultMinABI)
	for _, mode := range []string{"this-thread", "every-thread"} {
		t.Run(mode, func(t *testing.T) {
			if !isSubprocess(t) {
				base := t.TempDir()
				if err := os.Mkdir(filepath.Join(base, "rw"), 0o755); err != nil {
					t.Fatal(err)
				}
				runSubprocess(t, "TEST_BASE="+base)
				return
			}
			restrictThreads(t, mode == "this-thread", os.Getenv("TEST_BASE"))
		})
	}
}

func restrictThreads(t *testing.T, thisThread bool, base string) {
	runtime.LockOSThread()
	// A thread of its own, made before the restriction.
	jobs := make(chan func())
	go func() {
		runtime.LockOSThread()
		for j := range jobs {
			j()
		}
	}()
	onOther := func(f func()) {
		done := make(chan struct{})
		jobs <- func() { f(); close(done) }
		<-done
	}
	create := func(name string) error { return os.WriteFile(filepath.Join(base, name), nil, 0o644) }
	rw := filepath.Join(base, "rw")
	if thisThread {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Restrict(Config{WritableRoots: []string{rw}, ThisThread: thisThread}); err != nil {
		t.Fatalf("Restrict: %v", err)
	}
	wantErrno(t, "create outside on the restricted thread", create("main"), syscall.EACCES)
	if err := os.WriteFile(filepath.Join(rw, "main"), nil, 0o644); err != nil {
		t.Errorf("create inside on the restricted thread: %v", err)
	}
	var otherErr error
	onOther(func() { otherErr = create("other") })
	if thisThread {
		if otherErr != nil {
			t.Errorf("create outside on another thread: %v (only the calling thread was to be restricted)", otherErr)
		}
	} else {
		wantErrno(t, "create outside on another thread", otherErr, syscall.EACCES)
		// A thread made now is cloned from a restricted one.
		errc := make(chan error)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			errc <- create("later")
		}()
		wantErrno(t, "create outside on a thread made afterwards", <-errc, syscall.EACCES)
	}
	// What this thread forks is restricted either way.
	script := fmt.Sprintf(`! (: >%s/child) 2>/dev/null && : >%s/child`, base, rw)
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("child of the restricted thread: %v\n%s", err, out)
	}
	close(jobs)
}
