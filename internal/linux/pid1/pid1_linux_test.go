package pid1

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startInit starts this test binary as the init (its package init takes
// over on argv[0] Arg0) with the job socket at JobFD, as the zygote does,
// and hands it job with stdout to out. The report comes back on the
// socket returned.
func startInit(t *testing.T, j *Job, out *os.File) (*exec.Cmd, *os.File) {
	return startInitSys(t, j, out, nil)
}

// startInitSys is startInit with the init started under sys.
func startInitSys(t *testing.T, j *Job, out *os.File, sys *syscall.SysProcAttr) (*exec.Cmd, *os.File) {
	t.Helper()
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Ours in the runtime's poller, for reportOf's deadline.
	if err := syscall.SetNonblock(sp[0], true); err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(sp[0]), "job"), os.NewFile(uintptr(sp[1]), "init")
	t.Cleanup(func() { mine.Close() })
	cmd := &exec.Cmd{Path: os.Args[0], Args: []string{Arg0}, Env: []string{}, ExtraFiles: []*os.File{theirs}, SysProcAttr: sys}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	b, err := j.Encode()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	rights := syscall.UnixRights(int(null.Fd()), int(out.Fd()), int(out.Fd()))
	if err := syscall.Sendmsg(sp[0], b, rights, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Shutdown(sp[0], syscall.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	return cmd, mine
}

// reportOf reads the init's report: the status byte, then EOF.
func reportOf(t *testing.T, sock *os.File) []byte {
	t.Helper()
	sock.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(sock)
	if err != nil {
		t.Fatalf("reading the report: %v", err)
	}
	return b
}

// exitCode waits for the init, killing it (and failing) after 10 s.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the init did not end within 10s")
	}
	if err == nil {
		return 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

func TestInitRunsJob(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// The command gets the job's directory, environment and stdio; the
	// init exits with its status.
	// The init's job socket is not the command's.
	cmd, sock := startInit(t, &Job{Path: "/bin/sh", Dir: dir, Argv: []string{"sh", "-c", `echo "$PWD $V $0"; [ -e /proc/self/fd/3 ] && echo fd 3 leaked; exit 7`}, Env: []string{"V=job"}}, out)
	if r := reportOf(t, sock); string(r) != "\x07" {
		t.Errorf("report %q, want the command's status 7", r)
	}
	if code := exitCode(t, cmd); code != 7 {
		t.Errorf("init exited %d, want the command's 7", code)
	}
	b, _ := os.ReadFile(out.Name())
	if got, want := string(b), dir+" job sh\n"; got != want {
		t.Errorf("command wrote %q, want %q", got, want)
	}
}

func TestInitForwardsSignals(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// A command that traps SIGTERM and exits 3 on it, and a plain one
	// that dies of it: 128+15.
	for _, tc := range []struct {
		script string
		want   int
	}{
		{`trap 'exit 3' TERM; touch ` + ready + `; while :; do sleep 0.01; done`, 3},
		{`touch ` + ready + `; exec sleep 30`, 128 + int(syscall.SIGTERM)},
	} {
		os.Remove(ready)
		cmd, sock := startInit(t, &Job{Path: "/bin/sh", Dir: dir, Argv: []string{"sh", "-c", tc.script}, Env: []string{"PATH=/usr/bin:/bin"}}, out)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%s: command never started", tc.script)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if r := reportOf(t, sock); len(r) != 1 || int(r[0]) != tc.want {
			t.Errorf("%s: report %q, want %d", tc.script, r, tc.want)
		}
		if code := exitCode(t, cmd); code != tc.want {
			t.Errorf("%s: init exited %d, want %d", tc.script, code, tc.want)
		}
	}
}

func TestInitBadJob(t *testing.T) {
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// A command that cannot be started is the lone run's 127, with the
	// words on the command's stderr.
	cmd, _ := startInit(t, &Job{Path: "/nonexistent/cmd", Dir: "/", Argv: []string{"cmd"}}, out)
	if code := exitCode(t, cmd); code != 127 {
		t.Errorf("init exited %d, want 127", code)
	}
	if b, _ := os.ReadFile(out.Name()); !strings.Contains(string(b), "agentbox: starting cmd:") {
		t.Errorf("stderr %q does not say what failed", b)
	}
}

// TestInitReportsAfterTree runs the init as PID 1 of a pid namespace of
// its own, as the zygote does (which needs root here), and checks that its
// report comes only once what the command left behind is gone: a
// background child that holds the output pipe open must have died, so the
// pipe reads EOF as soon as the report is in.
func TestInitReportsAfterTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a pid namespace of its own needs root here; the resident helper's tests cover the init as an unprivileged user")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd, sock := startInitSys(t, &Job{Path: "/bin/sh", Dir: "/", Argv: []string{"sh", "-c", "sleep 30 & sleep 30 & exit 4"}, Env: []string{"PATH=/usr/bin:/bin"}}, w,
		&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	w.Close()
	if rep := reportOf(t, sock); string(rep) != "\x04" {
		t.Errorf("report %q, want the command's status 4", rep)
	}
	r.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the report, the output pipe read %d bytes, %v: the command's background children are still alive", n, err)
	}
	if code := exitCode(t, cmd); code != 4 {
		t.Errorf("init exited %d, want 4", code)
	}
}
