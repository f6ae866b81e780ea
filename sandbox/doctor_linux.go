package sandbox

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/apparmor"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/rawpolicy"
	"github.com/agentbox/agentbox/policy"
)

// linuxDoctor probes by doing: it runs `true` in a real sandbox built for
// the policy, so what it reports is what `run` would get.
func linuxDoctor(pol *policy.Policy) *Report {
	r := &Report{OS: runtime.GOOS}
	if pol == nil {
		pol = rawpolicy.New(rawpolicy.Fields{Mode: policy.ReadOnly, Cwd: "/"})
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
	probe := rawpolicy.Edit(pol, func(f *rawpolicy.Fields) { f.AllowDegraded = false })
	c := Command(probe, "true")
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	err := c.Run()
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
	return r
}
