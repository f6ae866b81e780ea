package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/apparmor"
	"github.com/agentbox/agentbox/internal/linux/landlock"
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
	spec, td, _, err := prepareLinux(pol, nil, &p.cleanup, &p.cleanup)
	if err != nil {
		return err
	}
	spec.Path, spec.Argv, spec.Cwd = c.Path, c.Args, c.workDir()
	base := *spec
	base.Env = td.Env(pol, c.Env, false)
	spec.Env = td.Env(pol, c.Env, true)
	cl, err := applyCaches(pol, spec, true)
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
	lp, err := linux.Start(spec, c.stdio())
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
			base.WritableRoots = append(slices.DeleteFunc(slices.Clone(base.WritableRoots), func(r string) bool { return slices.Contains(remapped, r) }),
				td.Roots(pol, false)...)
			lp, err = startDegraded(c, &base, nu, &cl)
		}
		if err != nil && proxy != nil {
			proxy.Close()
			proxy = nil
		}
	} else if err == nil && spec.Proxy {
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
	if spec.Resolver && nu == nil {
		// One run, one recorder: the proxy's. Every name the command
		// was answered is recorded once its Close returns.
		rec := proxy.Recorder()
		dns := serveResolver(lp.Resolver(), spec, pol, proxy, func(string, uint16) *netproxy.Recorder { return rec })
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

// degradedEgress starts the allow-list proxy on the host's loopback for a
// sandbox without a network namespace, and points spec at it: the
// command's proxy variables, and the only TCP destinations its connect
// supervisor allows.
func degradedEgress(pol *policy.Policy, spec *linux.Spec) (*netproxy.Server, error) {
	if !spec.MediateUnixConnect {
		return nil, errors.New("allow-listed egress without a network namespace needs connect mediation")
	}
	srv, lns, err := hostLoopbackProxy(pol)
	if err != nil {
		return nil, err
	}
	spec.Proxy = false
	spec.ProxyAddrs = []string{lns[0].Addr().String(), lns[1].Addr().String()}
	return srv, nil
}

// serveEgress serves the sandbox's proxy (the allow-list's, or the
// refusing one of a sandbox without network) on the listeners the sandbox
// handed over, for as long as the process runs.
func serveEgress(pol *policy.Policy, p *linux.Process) (*netproxy.Server, error) {
	lns := p.ProxyListeners()
	srv, err := newProxy(pol)
	if err != nil || len(lns) != 2 {
		for _, ln := range lns {
			ln.Close()
		}
		p.Resolver().Close()
		p.Kill()
		p.Wait()
		if err == nil {
			err = fmt.Errorf("the sandbox handed over %d proxy listeners, want 2", len(lns))
		}
		return nil, err
	}
	go srv.ServeHTTPProxy(lns[0])
	go srv.ServeSOCKS(lns[1])
	return srv, nil
}

// prepareLinux is what a lone run and a session share before their
// commands: stale placeholders swept, this policy's held (their release
// pushed on held; with a pool, into it), the private temporary
// directories made and held (their release pushed on kept), and the
// sandbox's spec with git writes applied; gh says what git's placeholders
// were made for. On an error the caller runs the stacks. The spec's Env
// is the caller's to set (td.Env).
func prepareLinux(pol *policy.Policy, pool *linux.Pool, held, kept *cleanupStack) (spec *linux.Spec, td *linux.TempDirs, gh gitHolds, err error) {
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
	spec = linuxSpec(pol, ph)
	applyNetworkOff(pol, spec)
	applyTransparent(pol, spec)
	td.Apply(spec)
	spec.WritableRoots = append(spec.WritableRoots, td.Roots(pol, true)...)
	git, gh, err := applyGitWrites(pol, spec, state, pool)
	if err != nil {
		return nil, nil, gh, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	held.add(git.Release)
	if os.Getenv(fsReportEnv) != "0" {
		spec.Files = fileRules(pol, spec)
	}
	return spec, td, gh, nil
}

// linuxSpec is the sandbox for pol, without the command: a lone run adds
// it, a session's commands bring their own.
func linuxSpec(pol *policy.Policy, ph *linux.Placeholders) *linux.Spec {
	hides, pins := linux.HidePlan(pol.Hidden(), pol.WritableRoots())
	return &linux.Spec{
		Hides:         hides,
		HidePins:      pins,
		Cwd:           pol.Cwd(),
		Mounts:        linux.Plan(pol, ph.Paths()),
		Network:       pol.Network(),
		WritableRoots: pol.WritableRoots(),
		Seccomp:       true,
		Landlock:      landlockUsable(),

		// Host daemons' unix sockets are not network: opening the
		// network does not open them, only allow_unix_sockets does.
		MediateUnixConnect: true,
		GuardStickyRoots:   os.Geteuid() == 0,
		AllowUnixSockets:   pol.AllowUnixSockets(),
		Proxy:              pol.AllowList() != nil,
		HostPorts:          pol.HostPorts(),
		Publish:            len(pol.Publish()) > 0,
	}
}

// startDegraded runs the command with Landlock and seccomp only, when user
// namespaces are unavailable, and only if the user opted in: the policy's
// missing guarantees are named either way.
func startDegraded(c *Cmd, spec *linux.Spec, cause *linux.NoUsernsError, cl **linux.CacheLayers) (*linux.Process, error) {
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
	d := *spec
	d.Degraded = true
	d.Mounts = nil
	withoutNetworkOff(&d)
	d.Landlock = true
	d.DenyInetSockets = !pol.Network()
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

func doctor(pol *policy.Policy) *Report {
	r := linuxDoctor(pol)
	ns := strings.HasPrefix(r.Backend, "namespaces")
	r.Checks = append(r.Checks, cacheChecks(pol, ns)...)
	r.Checks = append(r.Checks, tmpChecks(pol, ns)...)
	return r
}

// setup installs the AppArmor profile where AppArmor restricts user
// namespaces (Ubuntu 23.10 and later); elsewhere there is nothing to do.
func setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	exe, err := realExecutable()
	if err != nil {
		return err
	}
	return apparmor.Setup(ctx, out, exe)
}

// realExecutable is this binary's path with symlinks resolved: the path
// the kernel executes, which an AppArmor profile attaches to.
func realExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding agentbox's own binary: %w", err)
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("finding agentbox's own binary: %w", err)
	}
	return real, nil
}

func cleanup(ctx context.Context, out io.Writer) error {
	if err := apparmor.Remove(ctx, out); errors.Is(err, apparmor.ErrNotRoot) {
		fmt.Fprintf(out, "agentbox: kept the AppArmor profile (%v)\n", err)
	} else if err != nil {
		return err
	}
	state := stateDir()
	if state == "" {
		fmt.Fprintln(out, "agentbox: no state directory ($HOME unset); nothing recorded to clean up")
		return nil
	}
	layers, busy := linux.RemoveCacheLayers(state)
	for _, l := range layers {
		fmt.Fprintf(out, "removed tool cache layer %s\n", l)
	}
	for _, l := range busy {
		fmt.Fprintf(out, "kept tool cache layer %s: a running sandbox uses it\n", l)
	}
	temps, busyTemps := linux.RemoveTemps(state)
	for _, t := range temps {
		fmt.Fprintf(out, "removed private /tmp %s\n", t)
	}
	for _, t := range busyTemps {
		fmt.Fprintf(out, "kept private /tmp %s: a running sandbox uses it\n", t)
	}
	removed := linux.SweepPlaceholders(state)
	for _, p := range removed {
		fmt.Fprintf(out, "removed placeholder %s\n", p)
	}
	left := linux.RecordedPlaceholders(state)
	for _, p := range left {
		fmt.Fprintf(out, "kept placeholder %s: a running sandbox still uses it, or it is no longer empty\n", p)
	}
	if len(removed) == 0 && len(left) == 0 && len(layers) == 0 && len(busy) == 0 && len(temps) == 0 && len(busyTemps) == 0 {
		fmt.Fprintln(out, "agentbox: nothing to clean up")
	}
	return nil
}
