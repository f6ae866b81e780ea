// Package elevated runs commands in agentbox's elevated Windows sandbox.
//
// agentbox (as the real user) calls [Start]: it reads the sandbox user's
// credentials that agentbox-setup stored, creates a named pipe only that
// user may open, and starts agentbox-runner as that user with
// CreateProcessWithLogonW (Offline, which the firewall cuts off, unless
// the policy allows network). The runner ([RunnerMain]) connects back,
// receives the command, builds a write-restricted token from its own
// token (restricting SIDs Everyone, its logon SID and the synthetic
// sandbox SIDs), and starts the command suspended inside a kill-on-close
// job before resuming it. stdio, the exit status and cancellation travel
// as ipc frames over the pipe.
//
// Both sides check their peer's process id on the pipe and bound every
// wait with a timeout.
package elevated

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/exitcode"

	"github.com/agentbox/agentbox/internal/windows/ipc"
)

// Timeouts of the handshake. Logging on a user the first time creates
// its profile, which takes seconds, hence the generous connect timeout.
// They are variables so tests can shorten them.
var (
	ConnectTimeout = 60 * time.Second
	ReadyTimeout   = 30 * time.Second
)

// RunnerArgs is the runner's command line after its name.
func RunnerArgs(pipe string, parentPID uint32) []string {
	return []string{"--pipe=" + pipe, "--parent=" + strconv.FormatUint(uint64(parentPID), 10)}
}

// ParseRunnerArgs parses what RunnerArgs built.
func ParseRunnerArgs(args []string) (pipe string, parentPID uint32, err error) {
	fs := flag.NewFlagSet("agentbox-runner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&pipe, "pipe", "", "")
	pid := fs.Uint64("parent", 0, "")
	if err := fs.Parse(args); err != nil {
		return "", 0, fmt.Errorf("agentbox-runner: %w", err)
	}
	if pipe == "" || *pid == 0 || *pid > 1<<32-1 || fs.NArg() != 0 {
		return "", 0, errors.New("agentbox-runner: usage: agentbox-runner --pipe=NAME --parent=PID (started by agentbox, not by hand)")
	}
	if len(pipe) < len(`\\.\pipe\`) || pipe[:len(`\\.\pipe\`)] != `\\.\pipe\` {
		return "", 0, fmt.Errorf("agentbox-runner: %q is not a local pipe", pipe)
	}
	return pipe, uint32(*pid), nil
}

// StartError is a failure to start the command in the sandbox. Code is
// the CLI exit status for it.
type StartError = exitcode.Error

// startErrorFrom maps a runner error frame to the CLI's exit codes.
func startErrorFrom(e *ipc.Error) *StartError {
	code := exitcode.SandboxFailure
	switch e.Code {
	case ipc.CodeNotFound:
		code = exitcode.NotFound
	case ipc.CodeNotExec:
		code = exitcode.NotExecutable
	}
	return &StartError{Code: code, Err: e}
}
