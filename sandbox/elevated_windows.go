package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/internal/windows/elevated"
	winsetup "github.com/agentbox/agentbox/internal/windows/setup"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/internal/windows/winenv"
)

// Elevated mode ([windows] sandbox = "elevated"): the command runs as a
// sandbox user through agentbox-runner (package elevated), which
// `agentbox setup` installed with the users, their credentials and the
// firewall rules.
func init() { startElevated = startElevatedCmd }

func startElevatedCmd(c *Cmd) (process, error) {
	pol := c.Policy
	// Setup first: without it nothing may touch the disk.
	group, st, err := elevatedGroup()
	if err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	dir, err := unelevated.StateDir()
	if err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// The private tool caches are one more writable root here too: the
	// sandbox group and the cache root's own SID get the allow, so the
	// sandbox user writes there and nowhere else in this user's profile
	// (it reaches the directory by bypassing traverse checks:
	// SeChangeNotifyPrivilege, Everyone's by default, is the one
	// privilege the restricted token keeps). cleanup revokes the group's
	// ACE with the other recorded paths.
	cs, err := unelevated.PlanCaches(pol, c.Env)
	if err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	cmdEnv := c.Env
	if cs.Root != "" {
		if err := os.MkdirAll(cs.Root, 0o700); err != nil {
			return nil, &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("tool caches: %w", err)}
		}
		pol = unelevated.WithCaches(pol, cs)
		cmdEnv = unelevated.CacheEnv(cmdEnv, cs)
	}
	// The command's token is the sandbox user's, write-restricted with the
	// synthetic SID: a write must be allowed to both, so the writable
	// roots are granted to the sandbox group as well (and the protected
	// paths denied to both). The paths go into the SID state, which
	// `agentbox cleanup` hands to agentbox-setup to revoke.
	sb, err := unelevated.PrepareACL(pol, dir, group)
	if err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	if n := len(sb.ACL.Modified); n > 0 {
		c.diag("granted the sandbox SID and the %s group access on %d path(s) (first run for these roots; later runs only check)", winsetup.Group, n)
	}
	if !st.GrantsDone {
		c.diag("read access for the sandbox users is still being granted in the background (progress in %s); files outside the writable roots may be unreadable until it finishes",
			filepath.Join(st.Base, winsetup.ProgressLog))
	}
	restricting, err := sb.RunSIDs(pol)
	if err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// The runner takes the program as given; resolve it here, with the
	// command's PATH and PATHEXT, as unelevated mode does.
	path, err := unelevated.Resolve(c.Path, c.Env)
	if err != nil {
		return nil, &StartError{Code: startCode(err), Err: err}
	}
	// Network off is the Offline user's firewall rules: run only when the
	// firewall enforces them now (every profile on, local rules honoured).
	if !pol.Network() {
		ctx, cancel := context.WithTimeout(context.Background(), firewallTimeout)
		err := checkFirewall(ctx)
		cancel()
		if err != nil {
			return nil, &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("refusing to run with the network off: %w", err)}
		}
	}
	// The command runs as the sandbox user inside the user's repository,
	// which git refuses as "dubious ownership" unless it is a
	// safe.directory (the policy's own roots, not the cache directory).
	env, err := winenv.GitSafeDirectories(cmdEnv, append([]string{pol.Cwd()}, c.Policy.WritableRoots()...)...)
	if err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// No network variables: the firewall enforces the policy. Cancellation
	// goes through Cmd, which calls Kill on the adapter below.
	gl := newGitlinkGuard(pol)
	p, err := elevated.Start(context.Background(), elevated.Spec{
		Network: pol.Network(),
		Path:    path, Args: c.Args, Dir: c.workDir(), Env: env,
		SIDs:  restricting,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
	})
	if err != nil {
		code := CodeSandboxFailure
		var se *elevated.StartError
		if errors.As(err, &se) {
			code = se.Code
		}
		return nil, &StartError{Code: code, Err: err}
	}
	if !p.JobUI && p.Job != "" {
		c.diag("%s", p.Job)
	}
	return withGitlinkGuard(&elevatedProcess{p: p}, gl, c), nil
}

// checkFirewall is winsetup.CheckFirewall; tests replace it.
var checkFirewall = winsetup.CheckFirewall

const firewallTimeout = 30 * time.Second

// elevatedGroup checks the setup marker (the policy asks for no proxy
// ports) and returns the sandbox group's SID. Its errors wrap
// winsetup.ErrMissing or winsetup.ErrOutdated, which say to run `agentbox
// setup`.
func elevatedGroup() (string, *winsetup.Status, error) {
	st := winsetup.GetStatus()
	if st.Marker == nil {
		return "", st, st.Err
	}
	if err := winsetup.CheckMarker(st.Marker, nil); err != nil {
		return "", st, err
	}
	if st.Marker.GroupSID == "" {
		return "", st, fmt.Errorf("%w (the marker names no sandbox group)", winsetup.ErrOutdated)
	}
	return st.Marker.GroupSID, st, nil
}

// elevatedProcess adapts elevated.Process to process.
type elevatedProcess struct {
	p      *elevated.Process
	killed atomic.Bool
}

func (e *elevatedProcess) Wait() (*Status, error) {
	code, err := e.p.Wait()
	if err != nil {
		return nil, err
	}
	if e.killed.Load() {
		return &Status{Code: int(code), Signal: 9}, nil
	}
	return &Status{Code: int(code)}, nil
}

// Signal: as in unelevated mode, os.Kill and os.Interrupt end the tree.
func (e *elevatedProcess) Signal(sig os.Signal) error {
	if sig == os.Kill || sig == os.Interrupt {
		return e.Kill()
	}
	return fmt.Errorf("signal %v on windows: %w", sig, ErrUnsupported)
}

func (e *elevatedProcess) pid() int { return int(e.p.Pid()) }

func (e *elevatedProcess) Kill() error {
	e.killed.Store(true)
	return e.p.Kill()
}
