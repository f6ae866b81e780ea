//go:build linux || darwin

package sandbox

import (
	"os/exec"
	"syscall"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/lookpath"
)

// startUnsandboxed runs a danger-full-access command: no sandbox, but the
// same process-group handling so a timeout still ends everything it began.
func startUnsandboxed(c *Cmd, p *proc) error {
	// The command's own PATH, looked up as a sandboxed run looks it up,
	// with the same statuses (os/exec would use agentbox's PATH and
	// call a file that is not executable "not found").
	path, code, err := lookpath.FindIn(c.Path, lookpath.Env(c.Env), c.workDir())
	if err != nil {
		return &StartError{Code: code, Err: err}
	}
	cmd := exec.Command(path, c.Args[1:]...)
	cmd.Args = c.Args
	cmd.Env = c.Env
	cmd.Dir = c.workDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = startGroup(p, cmd, c.Stdin, c.Stdout, c.Stderr, c.WaitDelay)
	if err != nil {
		return &StartError{Code: exitcode.Classify(err), Err: err}
	}
	return nil
}
