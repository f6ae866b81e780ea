package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/internal/windows/elevated"
	"github.com/agentbox/agentbox/internal/windows/loopguard"
	winsetup "github.com/agentbox/agentbox/internal/windows/setup"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

// Elevated mode ([windows] sandbox = "elevated"): the command runs as a
// sandbox user through agentbox-runner (package elevated), which
// `agentbox setup` installed with the users, their credentials and the
// firewall rules.
func init() {
	startElevated = startElevatedCmd
	preflightElevated = func(c *Cmd) error {
		if _, _, err := elevatedGroup(c.Policy.AllowList() != nil); err != nil {
			return &StartError{Code: CodeSandboxFailure, Err: err}
		}
		return nil
	}
}

func startElevatedCmd(c *Cmd, p *proc) error {
	pol := c.Policy
	// Setup first: without it nothing may touch the disk.
	group, st, err := elevatedGroup(pol.AllowList() != nil)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// The private tool caches are one more writable root here too: the
	// sandbox group and the cache root's own SID get the allow, so the
	// sandbox user writes there and nowhere else in this user's profile
	// (it reaches the directory by bypassing traverse checks:
	// SeChangeNotifyPrivilege, Everyone's by default, is the one
	// privilege the restricted token keeps). cleanup revokes the group's
	// ACE with the other recorded paths.
	pol, cmdEnv, err := privateRoots(pol, c.Env)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// The command's token is the sandbox user's, write-restricted with the
	// synthetic SID: a write must be allowed to both, so the writable
	// roots are granted to the sandbox group as well (and the protected
	// paths denied to both). The paths go into the SID state, which
	// `agentbox cleanup` hands to agentbox-setup to revoke.
	sb, err := unelevated.PrepareACL(pol, dir, group)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
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
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// The runner takes the program as given; resolve it here, with the
	// command's PATH and PATHEXT, as unelevated mode does.
	path, err := unelevated.Resolve(c.Path, c.Env)
	if err != nil {
		return &StartError{Code: exitcode.Classify(err), Err: err}
	}
	// Network off is the Offline user's firewall rules: run only when the
	// firewall enforces them now (every profile on, local rules honoured).
	// With an allow-list the same user runs, and the firewall leaves it
	// agentbox's proxy ports on 127.0.0.1.
	var eg *elevatedEgress
	if !pol.Network() {
		ctx, cancel := context.WithTimeout(context.Background(), firewallTimeout)
		err := checkFirewall(ctx)
		cancel()
		if err != nil {
			return &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("refusing to run with the network off: %w", err)}
		}
		if eg, err = startElevatedEgress(pol, cmdEnv, dir, st.Marker.ProxyPorts); err != nil {
			return &StartError{Code: CodeSandboxFailure, Err: err}
		}
		if eg != nil && eg.srv != nil {
			// Last, once the proxy is closed: what only the proxy
			// used (the ports and the job handle).
			p.cleanup.add(eg.close)
			p.proxied(eg.srv)
		}
		if egressStarted != nil {
			egressStarted(eg)
		}
	}
	// The command runs as the sandbox user inside the user's repository,
	// which git refuses as "dubious ownership" unless it is a
	// safe.directory (the policy's own roots, not the cache directory).
	env, err := winenv.GitSafeDirectories(cmdEnv, append([]string{pol.Cwd()}, c.Policy.WritableRoots()...)...)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// Network off: no network variables, the firewall enforces the
	// policy. An allow-list: the proxy variables, pointing at the one
	// route the firewall leaves. Cancellation goes through Cmd, which
	// calls Kill on the adapter below.
	spec := elevated.Spec{
		Network: pol.Network(),
		Path:    path, Args: c.Args, Dir: c.workDir(), Env: env,
		SIDs:  restricting,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
	}
	if eg != nil && eg.srv != nil {
		spec.Env = winenv.ProxyEnforced(env, eg.env)
		spec.ProxyPorts = eg.ports
	}
	ep, err := elevated.Start(context.Background(), spec)
	if err != nil {
		code := CodeSandboxFailure
		var se *elevated.StartError
		if errors.As(err, &se) {
			code = se.Code
		}
		return &StartError{Code: code, Err: err}
	}
	if !ep.JobUI && ep.Job != "" {
		c.diag("%s", ep.Job)
	}
	e := &elevatedProcess{p: ep}
	p.wait, p.signal, p.kill, p.pid = e.Wait, e.Signal, e.Kill, int(ep.Pid())
	if eg != nil && eg.srv != nil {
		eg.job = ep.JobHandle()
		eg.guard.SetJob(eg.job)
	}
	return nil
}

// elevatedEgress is what an Offline run needs around agentbox's proxy
// range: for an allow-list, the run's proxy on two ports of the range,
// serving only the run's job; in any case, the check that nothing else
// listens on the range.
type elevatedEgress struct {
	srv     *netproxy.Server // nil: network off, no proxy
	guard   *loopguard.Guard
	ports   []int
	env     []string
	release []func()
	job     windows.Handle
}

// startElevatedEgress checks agentbox's proxy range (open, the setup
// marker's ports) for foreign listeners and, for an allow-list, starts the
// run's proxy on it (env is the command's, for JAVA_TOOL_OPTIONS). It
// returns nil with the network off and no range.
func startElevatedEgress(pol *policy.Policy, env []string, dir string, open []int) (*elevatedEgress, error) {
	if len(open) == 0 {
		return nil, nil // and no allow-list: elevatedGroup refused that
	}
	// Any program listening on the range could be reached by the
	// command, network off or not: refuse, naming it. Picking other
	// ports would not help; the firewall opens the whole range.
	rows, err := loopguard.Table()
	if err != nil {
		return nil, fmt.Errorf("reading the TCP table to check agentbox's proxy ports: %w", err)
	}
	if err := loopguard.Check(open, rows, loopguard.Owned(dir)); err != nil {
		return nil, fmt.Errorf("refusing to run: %w", err)
	}
	eg := &elevatedEgress{}
	if pol.AllowList() == nil {
		return eg, nil
	}
	if eg.srv, err = newEgressProxy(pol); err != nil {
		return nil, err
	}
	rec := eg.srv.Recorder()
	eg.guard = loopguard.NewGuard(func(port uint16, err error) {
		rec.Deny("127.0.0.1", port, err.Error())
	})
	var lns []net.Listener
	var lastErr error
	for _, p := range loopguard.Candidates(open, rows, rand.IntN(len(open))) {
		if len(lns) == 2 {
			break
		}
		// Claim, then listen: a concurrent run's listener check must never
		// see this listener unregistered (it would refuse to start). A
		// claim without a listener is harmless: a listener counts as
		// agentbox's only when its process matches the claim.
		rel, err := loopguard.Claim(dir, p, os.Getpid(), loopguard.Alive)
		if errors.Is(err, loopguard.ErrClaimed) {
			lastErr = err // another run is taking it
			continue
		}
		if err != nil {
			eg.close()
			closeAll(lns)
			return nil, err
		}
		ln, err := loopguard.Listen(p)
		if err != nil {
			rel()
			lastErr = err // another run took it since the table was read
			continue
		}
		eg.release = append(eg.release, rel)
		lns, eg.ports = append(lns, ln), append(eg.ports, p)
	}
	if len(lns) < 2 {
		eg.close()
		closeAll(lns)
		return nil, fmt.Errorf("no two free ports in agentbox's proxy range %d-%d (each allow-listed run holds two, so at most %d run at once; "+
			"`netsh interface ipv4 show excludedportrange protocol=tcp` shows whether Windows reserved them): %v",
			slices.Min(open), slices.Max(open), len(open)/2, lastErr)
	}
	go eg.srv.ServeHTTPProxy(eg.guard.Wrap(lns[0]))
	go eg.srv.ServeSOCKS(eg.guard.Wrap(lns[1]))
	java, _ := winenv.Get(env, "JAVA_TOOL_OPTIONS")
	eg.env = netproxy.Env(lns[0].Addr().String(), lns[1].Addr().String(), java)
	return eg, nil
}

// close ends the proxy, its registry records and the job handle; nil-safe.
func (eg *elevatedEgress) close() {
	if eg == nil {
		return
	}
	if eg.guard != nil {
		eg.guard.Fail() // release an Accept waiting for a job that never came
	}
	if eg.srv != nil {
		eg.srv.Close()
	}
	for _, rel := range eg.release {
		rel()
	}
	eg.release = nil
	if eg.job != 0 {
		windows.CloseHandle(eg.job)
		eg.job = 0
	}
}

func closeAll(lns []net.Listener) {
	for _, l := range lns {
		l.Close()
	}
}

// egressStarted, when set (tests), sees each Offline run's egress state
// once it is set up.
var egressStarted func(*elevatedEgress)

// checkFirewall is winsetup.CheckFirewall; tests replace it.
var checkFirewall = winsetup.CheckFirewall

const firewallTimeout = 30 * time.Second

// elevatedGroup checks the setup marker and returns the sandbox group's
// SID; allowList asks that the firewall leave a proxy range open (a setup
// before version 3 opened none). Its errors wrap winsetup.ErrMissing or
// winsetup.ErrOutdated, which say to run `agentbox setup`.
func elevatedGroup(allowList bool) (string, *winsetup.Status, error) {
	st := winsetup.GetStatus()
	if st.Marker == nil {
		return "", st, st.Err
	}
	if err := winsetup.CheckMarker(st.Marker, nil); err != nil {
		return "", st, err
	}
	if allowList && len(st.Marker.ProxyPorts) < 2 {
		return "", st, fmt.Errorf("%w (this setup opened no proxy ports, which allow-listed egress needs)", winsetup.ErrOutdated)
	}
	if st.Marker.GroupSID == "" {
		return "", st, fmt.Errorf("%w (the marker names no sandbox group)", winsetup.ErrOutdated)
	}
	return st.Marker.GroupSID, st, nil
}

// elevatedProcess is an elevated run's process: a kill is reported as
// SIGKILL, as on the other backends.
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

func (e *elevatedProcess) Kill() error {
	e.killed.Store(true)
	return e.p.Kill()
}
