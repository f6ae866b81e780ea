package pid1

import (
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
// and hands it job with stdout to out.
func startInit(t *testing.T, j *Job, out *os.File) *exec.Cmd {
	t.Helper()
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(sp[0]), "job"), os.NewFile(uintptr(sp[1]), "init")
	defer mine.Close()
	cmd := &exec.Cmd{Path: os.Args[0], Args: []string{Arg0}, Env: []string{}, ExtraFiles: []*os.File{theirs}}
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
	return cmd
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
	cmd := startInit(t, &Job{Path: "/bin/sh", Dir: dir, Argv: []string{"sh", "-c", `echo "$PWD $V $0"; exit 7`}, Env: []string{"V=job"}}, out)
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
		cmd := startInit(t, &Job{Path: "/bin/sh", Dir: dir, Argv: []string{"sh", "-c", tc.script}, Env: []string{"PATH=/usr/bin:/bin"}}, out)
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
	cmd := startInit(t, &Job{Path: "/nonexistent/cmd", Dir: "/", Argv: []string{"cmd"}}, out)
	if code := exitCode(t, cmd); code != 127 {
		t.Errorf("init exited %d, want 127", code)
	}
	if b, _ := os.ReadFile(out.Name()); !strings.Contains(string(b), "agentbox: starting cmd:") {
		t.Errorf("stderr %q does not say what failed", b)
	}
}
