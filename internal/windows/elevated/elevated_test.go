package elevated

import (
	"errors"
	"testing"

	"github.com/agentbox/agentbox/internal/exitcode"

	"github.com/agentbox/agentbox/internal/windows/ipc"
)

func TestRunnerArgs(t *testing.T) {
	pipe := `\\.\pipe\agentbox-runner-00ff`
	p, pid, err := ParseRunnerArgs(RunnerArgs(pipe, 4242))
	if err != nil || p != pipe || pid != 4242 {
		t.Fatalf("round trip: %q %d %v", p, pid, err)
	}
	for _, bad := range [][]string{
		nil,
		{"--pipe=" + pipe},
		{"--pipe=" + pipe, "--parent=0"},
		{"--pipe=" + pipe, "--parent=99999999999"},
		{"--pipe=C:\\x", "--parent=1"},
		{"--pipe=" + pipe, "--parent=1", "extra"},
		{"--evil"},
	} {
		if _, _, err := ParseRunnerArgs(bad); err == nil {
			t.Errorf("ParseRunnerArgs(%q) accepted", bad)
		}
	}
}

func TestStartErrorCodes(t *testing.T) {
	for code, want := range map[string]int{
		ipc.CodeNotFound: exitcode.NotFound, ipc.CodeNotExec: exitcode.NotExecutable,
		ipc.CodeToken: exitcode.SandboxFailure, ipc.CodeSpawnFailed: exitcode.SandboxFailure,
	} {
		e := startErrorFrom(&ipc.Error{Code: code, Message: "m"})
		var ie *ipc.Error
		if e.Code != want || !errors.As(e, &ie) {
			t.Errorf("%s: %d", code, e.Code)
		}
	}
}

// The runner's console (CreateProcessWithLogonW always gives it one) must
// start hidden, or a window flashes up for every elevated command.
func TestRunnerLaunchHidden(t *testing.T) {
	s := runnerLaunch()
	if s.StartupFlags&_STARTF_USESHOWWINDOW == 0 || s.ShowWindow != _SW_HIDE {
		t.Errorf("runner startup %+v: its console window is not hidden", s)
	}
	if s.CreationFlags&_CREATE_UNICODE_ENVIRONMENT == 0 {
		t.Errorf("runner startup %+v lacks CREATE_UNICODE_ENVIRONMENT", s)
	}
}
