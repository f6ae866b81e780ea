package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/apparmor"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/policy"
)

// linuxDoctor probes by doing: it runs `true` in a real sandbox built for
// the policy, so what it reports is what `run` would get.
func linuxDoctor(pol *policy.Policy) *Report {
	r := &Report{OS: runtime.GOOS}
	if pol == nil {
		pol = policy.ReadOnlyAt("/")
	}
	r.Mode = string(pol.Mode())
	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}

	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		add("kernel", true, "%s %s", unix.ByteSliceToString(uts.Release[:]), unix.ByteSliceToString(uts.Machine[:]))
	}

	if exe, err := realExecutable(); err == nil {
		ok, detail := apparmor.Inspect(apparmor.HostSystem(), exe).Check()
		add("apparmor", ok, "%s", detail)
	}

	abi, llErr := landlock.ABI()
	llOK := llErr == nil && abi >= landlock.DefaultMinABI
	switch {
	case llErr != nil:
		add("landlock", false, "unavailable: %v", llErr)
	case !llOK:
		add("landlock", false, "ABI %d is below the floor %d (truncate is not mediated)", abi, landlock.DefaultMinABI)
	default:
		scopes := "abstract unix sockets and signals scoped"
		if abi < 6 {
			scopes = "no abstract-socket or signal scoping (needs ABI 6)"
		}
		add("landlock", true, "ABI %d; %s", abi, scopes)
	}
	if _, err := seccomp.BuildNativeProgram(seccomp.Options{}); err != nil {
		add("seccomp", false, "%v", err)
	} else {
		add("seccomp", true, "filter for %s builds (%d rules); installed by the probe below", runtime.GOARCH, len(seccomp.Rules(seccomp.Options{})))
	}

	if pol.Mode() == policy.DangerFullAccess {
		r.Backend = "none (danger-full-access)"
		r.CanSandbox = true
		return r
	}
	// The probe: a real sandbox running true, degraded mode refused so we
	// learn whether namespaces work.
	probe := pol.WithAllowDegraded(false)
	run := func(p *policy.Policy) error {
		c := Command(p, "true")
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		return c.Run()
	}
	err := run(probe)
	machine := pol // what the machine is probed with
	var pe *linux.PlaceholderError
	if errors.As(err, &pe) {
		// The directory, not the machine: say which and why, and probe
		// the machine with nothing to keep free.
		add("protected paths", false, "%v", pe)
		r.Missing = append(r.Missing, fmt.Sprintf("runs of this policy are refused here: %s cannot be kept free in %s (see the protected paths check)", filepath.Base(pe.Path), pe.Dir))
		machine = pol.WithoutWrites()
		err = run(machine.WithAllowDegraded(false))
	}
	var nu *linux.NoUsernsError
	switch {
	case err == nil:
		add("user namespaces", true, "usable: user, mount, pid, ipc, uts, cgroup namespaces created")
		if pol.Network() {
			add("network namespace", true, "not used: the policy allows the network")
		} else {
			add("network namespace", true, "loopback-only namespace created")
		}
		r.Backend = "namespaces+seccomp"
		if llOK {
			r.Backend = "namespaces+landlock+seccomp"
		} else {
			r.Missing = append(r.Missing, "Landlock second filesystem wall (the mount namespace still enforces the policy)")
		}
		r.CanSandbox = true
	case errors.As(err, &nu):
		add("user namespaces", false, "%s", linux.UsernsReason(nu.Err))
		if !pol.Network() {
			add("network namespace", false, "unavailable without a user namespace; seccomp refuses non-unix sockets instead")
		}
		if llOK {
			r.Backend = "degraded: landlock+seccomp (needs Options.AllowDegraded)"
			r.Missing = append(r.Missing, linux.DegradedGaps(pol, llABI())...)
			r.CanSandbox = true
		} else {
			r.Backend = "none"
			r.Missing = append(r.Missing, "no namespaces and no Landlock: agentbox cannot sandbox anything here")
		}
	default:
		add("sandbox probe", false, "running `true` in the sandbox failed: %v", err)
		r.Backend = "none"
		r.Missing = append(r.Missing, "the sandbox could not be built: "+err.Error())
	}
	if pe == nil && pol.Mode() == policy.WorkspaceWrite {
		add("protected paths", true, "kept read-only in every writable root, existing or not (protected_subpaths): %s", strings.Join(pol.ProtectedNames(), ", "))
	}
	if pol.AllowList() != nil {
		r.Checks = append(r.Checks, allowListCheck(pol))
	}
	// How an allow-list would be enforced here, probed by running one.
	way := egressBroken
	switch {
	case err == nil:
		way = egressNetns
	case errors.As(err, &nu) && llOK:
		way = egressDegraded
	case errors.As(err, &nu):
		way = egressNone
	}
	var egressErr error
	transparent := false
	if way == egressNetns || way == egressDegraded {
		transparent, egressErr = probeEgress(machine, way == egressDegraded)
	}
	ec := egressCheck(pol, way, egressErr, transparent)
	r.Checks = append(r.Checks, ec)
	if pol.AllowList() != nil && !ec.OK {
		r.Missing = append(r.Missing, "allow-listed egress: "+ec.Detail)
	}
	return r
}

// probeEgress runs a command in a sandbox with an allow-list (the
// policy's, or one refusing everything) and the network otherwise off: a
// namespace sandbox whose init must hand its proxy listeners over, or,
// with degraded, the host-loopback proxy and the connect supervisor. It
// reports whether the sandbox had transparent networking: its default
// route over loopback, which the init adds only once the kernel took its
// nftables rules.
func probeEgress(pol *policy.Policy, degraded bool) (transparent bool, err error) {
	rules := pol.AllowList()
	if rules == nil {
		rules = &policy.AllowList{}
	}
	probe := pol.WithAllowList(rules).WithAllowDegraded(degraded)
	c := Command(probe, "cat", "/proc/net/route")
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	var out strings.Builder
	c.Stdout = &out
	if err := c.Run(); err != nil {
		return false, err
	}
	return !degraded && strings.Contains(out.String(), "\n"+"lo\t00000000\t"), nil
}

// egressWay is the sandbox doctor's probe found possible here, and so
// how an allow-list would be enforced.
type egressWay int

const (
	egressNetns    egressWay = iota // namespaces: the network namespace, proxy outside
	egressDegraded                  // no user namespaces, Landlock usable
	egressNone                      // no user namespaces, no Landlock
	egressBroken                    // the sandbox probe failed for another reason
)

// egressCheck says whether allow-listed egress (Options.AllowDomains, [network]
// allowed_domains) is available here and how, from the sandbox the probe
// could build and probe, what running an allow-list in it gave.
func egressCheck(pol *policy.Policy, way egressWay, probe error, transparent bool) Check {
	c := Check{Name: "allow-listed egress"}
	userns, degraded := way == egressNetns, way == egressDegraded
	var how string
	switch {
	case way == egressBroken:
		how = "refused: no sandbox could be built here (see the sandbox probe)"
	case userns && probe == nil:
		c.OK = true
		how = "available: the sandbox's own network namespace with only loopback; agentbox's proxy runs outside, on listeners made on the sandbox's 127.0.0.1 and handed over (a session: a pair per command, for its own report); nothing listens on the host"
		if transparent {
			how += "; names resolve inside and tools that ignore the proxy variables are carried (nftables rules in the sandbox's own namespace)"
		} else {
			how += "; no transparent networking (this kernel refused the sandbox's nftables rules): names do not resolve inside, and only tools that use the proxy variables reach the list"
		}
	case userns:
		how = fmt.Sprintf("refused: an allow-list sandbox failed to start here (%v)", probe)
	case degraded && probe == nil:
		c.OK = true
		how = "degraded only (needs Options.AllowDegraded): no network namespace, so agentbox's proxy listens on the host's loopback for each run and the seccomp connect supervisor lets TCP reach only its two ports; other local processes can use the proxy while a run lasts"
	case degraded:
		how = fmt.Sprintf("refused: no user namespaces, and the degraded allow-list (host-loopback proxy, connect supervisor) failed here (%v)", probe)
	default:
		how = "refused: no network namespace is possible here (no user namespaces) and no degraded sandbox either (Landlock unusable)"
	}
	switch {
	case pol.Mode() == policy.DangerFullAccess || pol.Network():
		how += "; not used by this policy, which opens the whole network"
	case pol.AllowList() == nil:
		how += "; not used by this policy (no allow-list: the network is off)"
	}
	c.Detail = how
	return c
}

// allowListCheck describes the policy's (valid: resolving it checked every
// pattern) allow-list, and names what opens local destinations.
func allowListCheck(pol *policy.Policy) Check {
	detail := fmt.Sprintf("%d allowed and %d denied patterns, all well-formed", len(pol.AllowedDomains()), len(pol.DeniedDomains()))
	var local []string
	for _, p := range pol.AllowList().LocalPatterns() {
		local = append(local, strconv.Quote(p))
	}
	if len(local) > 0 {
		detail += "; local addresses allowed by listing them: " + strings.Join(local, ", ")
	}
	if pol.AllowLocalBinding() {
		detail += "; allow_local_binding = true: allowed names may resolve to loopback and private addresses"
	}
	return Check{Name: "network allow-list", OK: true, Detail: detail}
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
