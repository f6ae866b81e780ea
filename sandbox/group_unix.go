//go:build linux || darwin

package sandbox

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
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
	copies    sync.WaitGroup
	copyErr   error
	copyMu    sync.Mutex
	closers   []io.Closer // our ends of the pipes, closed after Wait
}

// startGroup starts cmd (whose SysProcAttr must give it a process group of
// its own) with stdio relayed through pipes this process owns, so that
// waiting for the leader does not mean waiting for everything that holds
// its output. *os.File stdio is passed straight through, as in os/exec.
// It fills p's wait, signal, kill and pid.
func startGroup(p *proc, cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer, waitDelay time.Duration) error {
	g := &group{cmd: cmd, waitDelay: waitDelay}
	var childEnds []*os.File
	fail := func(err error) error {
		for _, f := range childEnds {
			f.Close()
		}
		for _, c := range g.closers {
			c.Close()
		}
		return err
	}
	switch f := stdin.(type) {
	case nil:
	case *os.File:
		cmd.Stdin = f
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		childEnds = append(childEnds, r)
		g.closers = append(g.closers, w)
		cmd.Stdin = r
		go func() {
			// A command that stops reading is not an error (EPIPE).
			io.Copy(w, stdin)
			w.Close()
		}()
	}
	out := func(dst io.Writer) (io.Writer, error) {
		switch f := dst.(type) {
		case nil:
			return nil, nil
		case *os.File:
			return f, nil
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		childEnds = append(childEnds, w)
		g.closers = append(g.closers, r)
		g.copies.Add(1)
		go func() {
			defer g.copies.Done()
			if _, err := io.Copy(dst, r); err != nil && !errors.Is(err, os.ErrClosed) {
				g.copyMu.Lock()
				if g.copyErr == nil {
					g.copyErr = err
				}
				g.copyMu.Unlock()
			}
		}()
		return w, nil
	}
	var err error
	if cmd.Stdout, err = out(stdout); err != nil {
		return fail(err)
	}
	if stderr != nil && stderr == stdout {
		cmd.Stderr = cmd.Stdout
	} else if cmd.Stderr, err = out(stderr); err != nil {
		return fail(err)
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	for _, f := range childEnds {
		f.Close()
	}
	p.wait, p.signal, p.kill, p.pid = g.Wait, cmd.Process.Signal, g.Kill, cmd.Process.Pid
	return nil
}

func (g *group) Wait() (*Status, error) {
	// Every stdio of cmd is an *os.File, so this returns when the leader
	// exits, whoever else still holds the pipes.
	err := g.cmd.Wait()
	// The leader is gone; nothing it started may outlive the run.
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	g.drain()
	ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return nil, err
	}
	if ws.Signaled() {
		return &Status{Signal: int(ws.Signal())}, nil
	}
	g.copyMu.Lock()
	defer g.copyMu.Unlock()
	if g.copyErr != nil {
		return nil, g.copyErr
	}
	return &Status{Code: ws.ExitStatus()}, nil
}

// drain waits for the output copies, for at most waitDelay when it is set
// (a process that left the group, with setsid, can hold the pipes open),
// then closes our ends.
func (g *group) drain() {
	done := make(chan struct{})
	go func() { g.copies.Wait(); close(done) }()
	if g.waitDelay > 0 {
		select {
		case <-done:
		case <-time.After(g.waitDelay):
		}
	} else {
		<-done
	}
	for _, c := range g.closers {
		c.Close()
	}
}

func (g *group) Kill() error {
	return syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
}
