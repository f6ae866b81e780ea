package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/windows/loopguard"
	winsetup "github.com/agentbox/agentbox/internal/windows/setup"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

func doctor(pol *policy.Policy) *Report {
	r := &Report{OS: "windows", CanSandbox: true}
	mode := policy.WorkspaceWrite
	network, elevatedMode := false, false
	if pol != nil {
		mode, network = pol.Mode(), pol.Network()
		elevatedMode = pol.Windows() == policy.Elevated && mode != policy.DangerFullAccess
	}
	r.Mode = string(mode)
	r.Backend = "unelevated: synthetic SID + ACLs + write-restricted token + kill-on-close job"
	if elevatedMode {
		r.Backend = "elevated: sandbox users + firewall + synthetic SID + ACLs + write-restricted token + kill-on-close job (agentbox-runner)"
	}
	add := func(name string, ok bool, detail string) {
		r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: detail})
	}
	if elevatedMode {
		doctorSetup(r, add)
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		add("state dir", false, err.Error())
		r.CanSandbox = false
	} else if st, err := sid.Load(dir); err == nil {
		add("sandbox SIDs", true, fmt.Sprintf("one per writable root (%d so far; a run carries only its own roots'), %s (read-only) in %s; ACEs on %d path(s), integrity labels on %d",
			len(st.Roots), st.ReadOnly, dir, len(st.Paths), len(st.Labels)))
	} else if errors.Is(err, fs.ErrNotExist) {
		add("sandbox SIDs", true, "not created yet; the first run creates them in "+dir)
	} else {
		add("sandbox SIDs", false, err.Error())
		r.CanSandbox = false
	}
	// In elevated mode agentbox-runner builds the same token from the
	// sandbox user's; probing it on this process's token shows the
	// system supports it.
	if self, err := winapi.OpenSelfToken(); err != nil {
		add("restricted token", false, err.Error())
		r.CanSandbox = false
	} else {
		probe, _ := sid.New()
		if t, err := winapi.RestrictedToken(self, probe); err != nil {
			add("restricted token", false, err.Error())
			r.CanSandbox = false
		} else {
			t.Close()
			add("restricted token", true, "WRITE_RESTRICTED; restricting SIDs Everyone, logon SID, the run's root SIDs")
		}
		self.Close()
	}
	if ni, err := winapi.NonInteractive(); err != nil {
		add("window station", false, err.Error())
		r.CanSandbox = false
	} else if ni {
		add("window station", true, "not interactive (a service, an OpenSSH session or session 0): each run gets a window station and desktop of agentbox's own")
	} else {
		add("window station", true, "interactive; each run gets a private desktop on it")
	}
	if j, err := winapi.NewJob(); err != nil {
		add("job object", false, err.Error())
		r.CanSandbox = false
	} else {
		j.Close()
		add("job object", true, j.Limits.String()+"; the process tree dies with the command")
	}
	if !elevatedMode && mode != policy.DangerFullAccess {
		for _, l := range unelevated.Limits(pol) {
			add("not guaranteed", false, l)
		}
	}
	if mode == policy.WorkspaceWrite {
		if _, err := unelevated.PlanCaches(pol, os.Environ()); err != nil {
			add("tool caches", false, err.Error()+" (workspace-write runs refuse to start)")
			r.CanSandbox = false
		}
		if _, err := unelevated.PlanTemp(pol, os.Environ()); err != nil {
			add("temporary directory", false, err.Error()+" (workspace-write runs refuse to start)")
			r.CanSandbox = false
		}
		r.Checks = append(r.Checks, cacheChecks(pol, false)...)
		r.Checks = append(r.Checks, tmpChecks(pol, false)...)
	}
	switch {
	case mode == policy.DangerFullAccess:
	case elevatedMode && network:
		add("network", true, "on: commands run as "+winsetup.OnlineUser+", which no firewall rule restricts")
	case elevatedMode:
		ctx, cancel := context.WithTimeout(context.Background(), firewallTimeout)
		err := checkFirewall(ctx)
		cancel()
		if err != nil {
			add("network", false, "off, NOT enforced: "+err.Error()+"; elevated runs with the network off refuse to start")
			r.Missing = append(r.Missing, err.Error())
			r.CanSandbox = false
		} else if pol != nil && pol.AllowList() != nil {
			add("network", true, "allow-list, enforced: the Windows Firewall lets "+winsetup.OfflineUser+
				" reach only TCP 127.0.0.1 on agentbox's proxy ports, and the run's proxy serves only the run's own processes (see \"proxy ports\")")
		} else {
			add("network", true, elevatedNetworkNote)
		}
	case !network:
		add("network", false, unelevated.NetworkNote)
	}
	if winapi.IsWine() {
		r.Missing = append(r.Missing, "running under Wine: restricted tokens and ACLs are accepted but not enforced")
		r.CanSandbox = false
	}
	return r
}

// elevatedNetworkNote is doctor's word on the network in elevated mode.
const elevatedNetworkNote = "off, enforced: the Windows Firewall (on for every profile, local rules honoured) blocks all outbound traffic of " + winsetup.OfflineUser +
	", the account commands run as, and inbound traffic from other machines to it (unelevated mode can only advise programs to stay offline); " +
	"not covered: DNS lookups made by the DNS Client service and SMB/UNC access made by the kernel's SMB client, which run as SYSTEM"

// doctorSetup reports elevated mode's setup marker and read grants. A
// missing or outdated setup means no elevated run can start.
func doctorSetup(r *Report, add func(string, bool, string)) {
	st := winsetup.GetStatus()
	_, _, err := elevatedGroup(false)
	switch {
	case err == nil:
		m := st.Marker
		add("elevated setup", true, fmt.Sprintf("ok: version %d, done %s; users %s, %s; state in %s",
			m.Version, m.CreatedAt.Format("2006-01-02 15:04 MST"), winsetup.OfflineUser, winsetup.OnlineUser, st.Base))
	case errors.Is(err, winsetup.ErrMissing):
		add("elevated setup", false, "missing: "+err.Error())
	default:
		add("elevated setup", false, "outdated: "+err.Error())
	}
	if err != nil {
		r.Missing = append(r.Missing, err.Error())
		r.CanSandbox = false
	}
	if st.Marker == nil {
		return
	}
	doctorProxyPorts(r, add, st.Marker.ProxyPorts)
	progress := filepath.Join(st.Base, winsetup.ProgressLog)
	if st.GrantsDone {
		add("read grants", true, fmt.Sprintf("done: the sandbox users may read %d granted path(s)", st.Granted))
	} else {
		// Not a failure: runs work, some reads may not yet.
		add("read grants", true, fmt.Sprintf("in progress in the background (%d path(s) so far; see %s): until done, files outside the writable roots may be unreadable", st.Granted, progress))
	}
}

// doctorProxyPorts reports the proxy range the firewall leaves open to
// the Offline user, and whether a foreign listener holds a port of it now
// (which makes every Offline run refuse to start).
func doctorProxyPorts(r *Report, add func(string, bool, string), open []int) {
	if len(open) == 0 {
		add("proxy ports", true, "none open: the Offline user reaches no loopback port; allow-listed egress needs `agentbox setup` again")
		return
	}
	rng := "127.0.0.1:" + winsetup.PortList(open)
	rows, err := loopguard.Table()
	if err == nil {
		dir, derr := agentdirs.RequireState(os.Getenv, runtime.GOOS)
		if derr != nil {
			err = derr
		} else {
			err = loopguard.Check(open, rows, loopguard.Owned(dir))
		}
	}
	if err != nil {
		add("proxy ports", false, rng+" open to "+winsetup.OfflineUser+": "+err.Error()+"; elevated runs with the network off or an allow-list refuse to start")
		r.Missing = append(r.Missing, err.Error())
		r.CanSandbox = false
		return
	}
	add("proxy ports", true, rng+" open to "+winsetup.OfflineUser+" for allow-listed runs' proxies (each run listens on two and serves only processes of its own job; other runs' connections are refused and reported); no other program listens there now (checked again before every Offline run)")
}

func setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	if pol != nil && pol.Windows() == policy.Elevated {
		return setupElevated(ctx, pol, out)
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		return err
	}
	if pol == nil {
		pol = policy.ReadOnlyAt("")
	}
	sb, err := unelevated.Prepare(pol, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "agentbox: unelevated sandbox ready (no administrator rights needed); state in %s\n", dir)
	fmt.Fprintf(out, "agentbox: sandbox SIDs: one per writable root (%d), %s (read-only)\n", len(sb.State.Roots), sb.State.ReadOnly)
	fmt.Fprintf(out, "agentbox: ACLs: checked %d path(s), modified %d, labelled %d, created %d placeholder(s)\n",
		sb.ACL.Checked, len(sb.ACL.Modified), len(sb.ACL.Labeled), len(sb.ACL.Created))
	return nil
}

// setupElevated runs agentbox-setup as administrator (one UAC prompt),
// then grants the policy's writable roots as runs would, so the first run
// is fast.
func setupElevated(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	// The sandbox users must be able to read the workspace even where no
	// write grant covers it (read-only runs, a workspace outside the
	// profile).
	var roots []string
	if pol.Cwd() != "" {
		roots = append(roots, pol.Cwd())
	}
	roots = append(roots, pol.WritableRoots()...)
	// The proxy range is fixed here, once: the firewall rules that open
	// it need administrator rights, so every allow-listed run later
	// shares it (see package loopguard).
	if err := winsetup.Run(ctx, winsetup.Options{ExtraReadRoots: roots, ProxyPorts: loopguard.DefaultPorts()}, out); err != nil {
		return uacError(err, "nothing was set up")
	}
	group, _, err := elevatedGroup(false)
	if err != nil {
		return fmt.Errorf("agentbox-setup finished but: %w", err)
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		return err
	}
	sb, err := unelevated.PrepareACL(pol, dir, group)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "agentbox: elevated sandbox ready; network blocking is enforced by the firewall for %s (allow-listed runs: only agentbox's proxy on 127.0.0.1:%s)\n",
		winsetup.OfflineUser, winsetup.PortList(loopguard.DefaultPorts()))
	fmt.Fprintf(out, "agentbox: write ACLs for this workspace: checked %d path(s), modified %d, created %d placeholder(s)\n",
		sb.ACL.Checked, len(sb.ACL.Modified), len(sb.ACL.Created))
	return nil
}

// uacError says plainly what a declined UAC prompt means.
func uacError(err error, outcome string) error {
	if errors.Is(err, winsetup.ErrCancelled) {
		return fmt.Errorf("the UAC prompt was declined, so %s; elevated mode needs administrator rights for setup and cleanup: run the command again and accept the prompt (%w)", outcome, err)
	}
	return err
}

// cleanup removes elevated mode's footprint first: agentbox-setup reads
// the SID state to revoke the sandbox group's ACEs on the writable roots,
// so that state is kept when it fails and a retry finds those paths.
func cleanup(ctx context.Context, out io.Writer) error {
	if err := winsetup.Cleanup(ctx, out); err != nil {
		return fmt.Errorf("elevated sandbox: %w (unelevated state kept, so a retry can still revoke every ACE)", uacError(err, "nothing was removed"))
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		return err
	}
	if n := loopguard.Prune(dir, loopguard.Alive); n > 0 {
		fmt.Fprintf(out, "agentbox: removed %d stale proxy port record(s) from %s\n", n, filepath.Join(dir, loopguard.RegistryDir))
	}
	return unelevated.Cleanup(dir, out)
}
