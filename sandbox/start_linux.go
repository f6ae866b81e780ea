package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// Main is no longer needed: the Linux init stage takes over from a package
// init function, before the program's main runs (see the package
// documentation). It is kept so that programs calling it still build; it
// returns at once.
//
// Deprecated: nothing needs to call Main.
func Main() {
	if linux.IsInit() {
		linux.RunInit() // not reached: the stage ran at package init
	}
}

// preflight has nothing to refuse before the backend starts here.
func preflight(*Cmd) error { return nil }

func start(c *Cmd, p *proc) error {
	pol := c.Policy
	if pol.Mode() == policy.DangerFullAccess {
		return startUnsandboxed(c, p)
	}
	sp, td, _, err := prepareLinux(pol, nil, &p.cleanup, &p.cleanup)
	if err != nil {
		return err
	}
	sp.Command.Path, sp.Command.Argv, sp.Command.Cwd = c.Path, c.Args, c.workDir()
	base := *sp
	base.Command.Env = td.Env(pol, c.Env, false)
	sp.Command.Env = td.Env(pol, c.Env, true)
	cl, err := applyCaches(pol, sp, true)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	// cl, not its value now: a degraded run replaces the layers.
	p.cleanup.add(func() { cl.Release() })
	relay, err := listenPublished(pol)
	if err != nil {
		return err
	}
	p.cleanup.add(relay.Close)
	lp, err := linux.Start(sp, c.stdio())
	var nu *linux.NoUsernsError
	var proxy *netproxy.Server
	if errors.As(err, &nu) {
		// The first attempt's layers are for overlays; the degraded run
		// gets private caches (startDegraded prepares them).
		cl.Release()
		cl = nil
		err = nil
		if pol.AllowList() != nil {
			proxy, err = degradedEgress(pol, &base)
		}
		if err == nil {
			// Nothing is mounted: the private directories are written
			// where they are on the host.
			remapped := td.Roots(pol, true)
			base.Walls.WritableRoots = append(slices.DeleteFunc(slices.Clone(base.Walls.WritableRoots), func(r string) bool { return slices.Contains(remapped, r) }),
				td.Roots(pol, false)...)
			lp, err = startDegraded(c, &base, nu, &cl)
		}
		if err != nil && proxy != nil {
			proxy.Close()
			proxy = nil
		}
	} else if err == nil && sp.Net.Proxy {
		proxy, err = serveEgress(pol, lp)
	}
	if err != nil {
		return startError(err)
	}
	if proxy != nil {
		// The sandbox is gone: end its tunnels, and close the
		// listeners, the last hold on its network namespace.
		p.cleanup.addErr(proxy.Close)
	}
	published := &publishCounter{}
	if nu == nil {
		if err = relay.serve(lp.Ports(), func() (*netproxy.Recorder, *publishCounter) { return recorderOf(proxy), published }); err != nil {
			lp.Resolver().Close()
			lp.Kill()
			lp.Wait()
			return startError(err)
		}
	}
	if sp.Net.Resolver && nu == nil {
		// One run, one recorder: the proxy's. Every name the command
		// was answered is recorded once its Close returns.
		rec := proxy.Recorder()
		dns := serveResolver(lp.Resolver(), sp, pol, proxy, func(string, uint16) *netproxy.Recorder { return rec })
		p.cleanup.add(func() { closeResolver(dns) })
	}
	p.wait = statusOf(lp.Wait)
	p.signal, p.kill, p.pid = lp.Signal, lp.Kill, lp.Pid()
	p.addReport(func(s *sections) {
		if proxy != nil {
			recordUnreachable(proxy.Recorder(), lp.Unreachable())
			s.network = proxy.Recorder().Report()
		}
		s.published = published.report()
		s.files, s.filesUnavailable = lp.Files()
	})
	return nil
}

// statusOf is a Linux backend's wait as a proc's.
func statusOf(wait func() (code, sig int, err error)) func() (*Status, error) {
	return func() (*Status, error) {
		code, sig, err := wait()
		if err != nil {
			return nil, err
		}
		return &Status{Code: code, Signal: sig}, nil
	}
}

// prepareLinux is what a lone run and a session share before their
// commands: stale placeholders swept, this policy's held (their release
// pushed on held; with a pool, into it), the private temporary
// directories made and held (their release pushed on kept), and the
// sandbox's spec with git writes applied; gh says what git's placeholders
// were made for. On an error the caller runs the stacks. The spec's Env
// is the caller's to set (td.Env).
func prepareLinux(pol *policy.Policy, pool *linux.Pool, held, kept *cleanupStack) (sp *spec.Spec, td *linux.TempDirs, gh gitHolds, err error) {
	state := stateDir()
	if state != "" {
		linux.SweepPlaceholders(state)
	}
	ph, err := linux.AcquirePooled(linux.HeldDirs(pol), state, pool)
	if err != nil {
		return nil, nil, gh, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	held.add(ph.Release)
	if td, err = linux.PrepareTemps(pol); err != nil {
		return nil, nil, gh, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	kept.add(td.Release)
	sp = linuxSpec(pol, ph)
	applyNetworkOff(pol, sp)
	applyTransparent(pol, sp)
	td.Apply(sp)
	sp.Walls.WritableRoots = append(sp.Walls.WritableRoots, td.Roots(pol, true)...)
	git, gh, err := applyGitWrites(pol, sp, state, pool)
	if err != nil {
		return nil, nil, gh, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	held.add(git.Release)
	if os.Getenv(fsReportEnv) != "0" {
		sp.Walls.Files = fileRules(pol, sp)
	}
	return sp, td, gh, nil
}

// linuxSpec is the sandbox for pol, without the command: a lone run adds
// it, a session's commands bring their own.
func linuxSpec(pol *policy.Policy, ph *linux.Placeholders) *spec.Spec {
	hides, pins := linux.HidePlan(pol.Hidden(), pol.WritableRoots())
	return &spec.Spec{
		Command: spec.Command{Cwd: pol.Cwd()},
		FS: spec.FS{
			Mounts:   linux.Plan(pol, ph.Paths()),
			Hides:    hides,
			HidePins: pins,
		},
		Walls: spec.Walls{
			WritableRoots: pol.WritableRoots(),
			Seccomp:       true,
			Landlock:      landlockUsable(),
			// Host daemons' unix sockets are not network: opening the
			// network does not open them, only allow_unix_sockets does.
			MediateUnixConnect: true,
			GuardStickyRoots:   os.Geteuid() == 0,
			AllowUnixSockets:   pol.AllowUnixSockets(),
		},
		Net: spec.Net{
			Network:   pol.Network(),
			Proxy:     pol.AllowList() != nil,
			HostPorts: pol.HostPorts(),
			Publish:   len(pol.Publish()) > 0,
		},
	}
}

// startDegraded runs the command with Landlock and seccomp only, when user
// namespaces are unavailable, and only if the user opted in: the policy's
// missing guarantees are named either way.
func startDegraded(c *Cmd, sp *spec.Spec, cause *linux.NoUsernsError, cl **linux.CacheLayers) (*linux.Process, error) {
	pol := c.Policy
	if err := refuseDegradedPorts(pol); err != nil {
		return nil, fmt.Errorf("%w (%v)", err, cause)
	}
	gaps := linux.DegradedGaps(pol, llABI())
	if !pol.AllowDegraded() {
		return nil, fmt.Errorf("%w; without them agentbox would run with Landlock and seccomp only, which cannot guarantee:\n  - %s\nrefusing to run: enable user namespaces, or accept these gaps with Options.AllowDegraded (or [linux] allow_degraded = true)",
			cause, strings.Join(gaps, "\n  - "))
	}
	abi, err := landlock.ABI()
	if err != nil || abi < landlock.DefaultMinABI {
		return nil, fmt.Errorf("%w, and Landlock is unusable (ABI %d, need %d: %v): no sandbox is possible here", cause, abi, landlock.DefaultMinABI, err)
	}
	c.diag("running degraded (%v); not guaranteed:", cause)
	for _, g := range gaps {
		c.diag("  - %s", g)
	}
	d := *sp
	d.Degraded.On = true
	d.FS.Mounts = nil
	withoutNetworkOff(&d)
	d.Walls.Landlock = true
	d.Walls.DenyInetSockets = !pol.Network()
	// No overlays without a user namespace: caches go private.
	if *cl, err = applyCaches(pol, &d, false); err != nil {
		return nil, err
	}
	return linux.Start(&d, c.stdio())
}

func (c *Cmd) stdio() linux.Stdio {
	return linux.Stdio{Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, WaitDelay: c.WaitDelay}
}

// llABI is the kernel's Landlock ABI, 0 when there is none.
func llABI() int {
	abi, err := landlock.ABI()
	if err != nil {
		return 0
	}
	return abi
}

// landlockUsable reports whether the kernel offers Landlock at the floor the
// landlock package enforces; the probe is one syscall.
func landlockUsable() bool {
	abi, err := landlock.ABI()
	return err == nil && abi >= landlock.DefaultMinABI
}
