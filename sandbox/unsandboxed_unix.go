//go:build linux || darwin

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// startUnsandboxed runs a danger-full-access command: no sandbox, but the
// same process-group handling so a timeout still ends everything it began.
func startUnsandboxed(c *Cmd) (process, error) {
	cmd := exec.Command(c.Path, c.Args[1:]...)
	cmd.Args = c.Args
	cmd.Env = c.Env
	cmd.Dir = c.Policy.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.WaitDelay = c.WaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		code := CodeSandboxFailure
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
			code = CodeNotFound
		case errors.Is(err, os.ErrPermission):
			code = CodeNotExecutable
		}
		return nil, &StartError{code, err}
	}
	return &groupProcess{cmd}, nil
}

type groupProcess struct{ cmd *exec.Cmd }

func (g *groupProcess) Wait() (*Status, error) {
	err := g.cmd.Wait()
	// The leader is gone; nothing it started may outlive the run.
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return nil, err
	}
	if ws.Signaled() {
		return &Status{Signal: int(ws.Signal())}, nil
	}
	return &Status{Code: ws.ExitStatus()}, nil
}

func (g *groupProcess) Signal(s os.Signal) error { return g.cmd.Process.Signal(s) }
func (g *groupProcess) Kill() error {
	return syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
}
