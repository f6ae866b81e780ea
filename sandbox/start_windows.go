package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/stdio"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

// Main is a no-op on Windows: there is no re-exec stage.
//
// Deprecated: nothing needs to call Main.
func Main() {}

// startElevated is set by the elevated-mode backend when it is linked in.
var startElevated func(c *Cmd, p *proc) error

// preflightElevated is set with startElevated: the setup check, which
// must pass before anything (the checks' state, the private temporary
// directories) touches the disk.
var preflightElevated func(c *Cmd) error

// preflight refuses, before anything is written, a run the backend can
// already tell it will refuse.
func preflight(c *Cmd) error {
	if c.Policy.Mode() != policy.DangerFullAccess && c.Policy.Windows() == policy.Elevated && preflightElevated != nil {
		return preflightElevated(c)
	}
	return nil
}

func start(c *Cmd, p *proc) error {
	pol := c.Policy
	if pol.Mode() != policy.DangerFullAccess && pol.Windows() == policy.Elevated {
		if startElevated == nil {
			return &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf(
				`windows elevated sandbox is not available in this build (set [windows] sandbox = "unelevated"): %w`, ErrUnsupported)}
		}
		return startElevated(c, p)
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	var sb *unelevated.Sandbox
	env := c.Env
	if pol.Mode() == policy.DangerFullAccess {
		sb = &unelevated.Sandbox{StateDir: dir}
	} else {
		// The private tool caches and temporary directory are more
		// writable roots of the run: their own SID, an allow for it and
		// a Low label.
		if pol, env, err = privateRoots(pol, env); err != nil {
			return &StartError{Code: CodeSandboxFailure, Err: err}
		}
		if sb, err = unelevated.Prepare(pol, dir); err != nil {
			return &StartError{Code: CodeSandboxFailure, Err: err}
		}
		if n := len(sb.ACL.Modified); n > 0 {
			c.diag("granted the sandbox SID access on %d path(s) (first run for these roots; later runs only check)", n)
		}
		if pol.AllowList() != nil {
			c.diag("%s", unelevated.EgressNote)
		} else if !pol.Network() {
			c.diag("%s", unelevated.NetworkNote)
		}
		for _, r := range unelevated.Limits(pol) {
			c.diag("not guaranteed in unelevated mode: %s", r)
		}
	}
	proxy, proxyEnv, err := windowsEgress(pol, c.Env)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	if proxy != nil {
		p.proxied(proxy)
	}
	sio, err := newStdio(c, pol.Mode() != policy.DangerFullAccess)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	f := sio.Files()
	wp, err := sb.Start(pol, unelevated.Spec{
		Path: c.Path, Args: c.Args, Env: env, Dir: c.workDir(), ProxyEnv: proxyEnv,
		Stdin: windows.Handle(f[0].Fd()), Stdout: windows.Handle(f[1].Fd()), Stderr: windows.Handle(f[2].Fd()),
	})
	if err != nil {
		sio.Abort()
		return &StartError{Code: exitcode.Classify(err), Err: err}
	}
	if l := wp.JobLimits(); pol.Mode() != policy.DangerFullAccess && !l.UI && !winapi.IsWine() {
		c.diag("%s", l)
	}
	// The child has its own duplicates now; ours would keep its
	// output open past its end.
	sio.CloseChild()
	sio.Start()
	w := &winProcess{p: wp, io: sio, waitDelay: c.WaitDelay}
	p.wait, p.signal, p.kill, p.pid = w.Wait, w.Signal, wp.Kill, int(wp.Pid())
	return nil
}

// privateRoots creates the private tool caches and temporary directory
// and makes them writable roots of pol, with env pointing at them; both
// modes use it.
func privateRoots(pol *policy.Policy, env []string) (*policy.Policy, []string, error) {
	cs, err := unelevated.PlanCaches(pol, env)
	if err != nil {
		return nil, nil, err
	}
	if cs.Root != "" {
		if err := os.MkdirAll(cs.Root, 0o700); err != nil {
			return nil, nil, fmt.Errorf("tool caches: %w", err)
		}
		pol = unelevated.WithCaches(pol, cs)
		env = unelevated.CacheEnv(env, cs)
	}
	return privateTemp(pol, env)
}

// privateTemp creates the workspace's private temporary directory, makes
// it one more writable root of the run (its own SID, an allow for it and
// a Low label, as the private tool caches) and points %TEMP% and %TMP%
// at it; both modes use it.
func privateTemp(pol *policy.Policy, env []string) (*policy.Policy, []string, error) {
	tmp, err := unelevated.PlanTemp(pol, env)
	if err != nil || tmp.Root == "" {
		return pol, env, err
	}
	if err := os.MkdirAll(tmp.Root, 0o700); err != nil {
		return nil, nil, fmt.Errorf("private temporary directory: %w", err)
	}
	return unelevated.WithTemp(pol, tmp), unelevated.TempEnv(env, tmp), nil
}

// newStdio sets up the child's stdio. confined (every mode but
// danger-full-access) relays a console through pipes instead of handing
// the child the console handle: with it, the child could write input
// records into the user's shell (WriteConsoleInput) or read its screen.
// The command then sees pipes, not a terminal.
func newStdio(c *Cmd, confined bool) (*stdio.Relay, error) {
	return stdio.New(stdio.Config{
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
		Pass: func(f *os.File) bool { return !confined || !winapi.IsConsole(windows.Handle(f.Fd())) },
	})
}

// winProcess is an unelevated run's process and its stdio relay.
type winProcess struct {
	p         *unelevated.Proc
	io        *stdio.Relay
	waitDelay time.Duration
}

func (w *winProcess) Wait() (*Status, error) {
	code, killed, err := w.p.Wait()
	cerr := w.io.Wait(w.waitDelay)
	if err != nil {
		return nil, err
	}
	if killed {
		return &Status{Code: int(code), Signal: 9}, nil
	}
	if cerr != nil && code == 0 {
		// As os/exec: a lost output is the error of a command that
		// otherwise succeeded.
		return nil, fmt.Errorf("copying the command's output: %w", cerr)
	}
	return &Status{Code: int(code)}, nil
}

// Signal: Windows has no signals to send to another process tree; both
// os.Kill and os.Interrupt end the whole tree.
func (w *winProcess) Signal(sig os.Signal) error {
	if sig == os.Kill || sig == os.Interrupt {
		return w.p.Kill()
	}
	return fmt.Errorf("signal %v on windows: %w", sig, ErrUnsupported)
}
