//go:build linux || darwin

package sandbox

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/stdio"
)

// group is a command leading its own process group (a session on macOS)
// without a pid namespace, and its stdio relay: its wait returns once the
// leader has exited,
// the rest of its group has been killed and its output drained. os/exec
// alone would wait for every holder of the output pipes first, so
// `sh -c 'sleep 4 & echo hi'` took four seconds to return "hi".
type group struct {
	cmd       *exec.Cmd
	waitDelay time.Duration
	relay     *stdio.Relay
}

// startGroup starts cmd (whose SysProcAttr must give it a process group of
// its own) with stdio relayed through pipes this process owns, so that
// waiting for the leader does not mean waiting for everything that holds
// its output. *os.File stdio is passed straight through, as in os/exec.
// It fills p's wait, signal, kill and pid.
func startGroup(p *proc, cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer, waitDelay time.Duration) error {
	rl, err := stdio.New(stdio.Config{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return err
	}
	f := rl.Files()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f[0], f[1], f[2]
	if err := cmd.Start(); err != nil {
		rl.Abort()
		return err
	}
	rl.CloseChild()
	rl.Start()
	g := &group{cmd: cmd, waitDelay: waitDelay, relay: rl}
	p.wait, p.signal, p.kill, p.pid = g.Wait, cmd.Process.Signal, g.Kill, cmd.Process.Pid
	return nil
}

func (g *group) Wait() (*Status, error) {
	// Every stdio of cmd is an *os.File, so this returns when the leader
	// exits, whoever else still holds the pipes.
	err := g.cmd.Wait()
	// The leader is gone; nothing it started may outlive the run. A
	// process that left the group (setsid) can still hold the pipes:
	// waitDelay bounds the drain.
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	cerr := g.relay.Wait(g.waitDelay)
	ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return nil, err
	}
	if ws.Signaled() {
		return &Status{Signal: int(ws.Signal())}, nil
	}
	if cerr != nil && ws.ExitStatus() == 0 {
		// As os/exec: a lost output is the error of a command that
		// otherwise succeeded.
		return nil, fmt.Errorf("copying the command's output: %w", cerr)
	}
	return &Status{Code: ws.ExitStatus()}, nil
}

func (g *group) Kill() error {
	return syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
}
