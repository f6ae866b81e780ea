package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/acl"
	winsetup "github.com/agentbox/agentbox/internal/windows/setup"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

// Elevated mode's tests. Without a real setup (users, credentials,
// firewall) they check the wiring: the setup marker gates every run,
// doctor reports it, and the writable roots are granted to the sandbox
// group. TestElevatedOnHost runs commands for real on a prepared Windows
// host.

const testGroupSID = "S-1-5-21-1-2-3-1003"

// elevatedPolicy is testPolicy with [windows] sandbox = "elevated" and a
// private, empty %ProgramData% (so the machine's own setup, if any, is
// not seen). It returns the policy and the ProgramData directory.
func elevatedPolicy(t *testing.T, mode policy.Mode) (*policy.Policy, string) {
	t.Helper()
	pol, _ := testPolicy(t, mode)
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Windows = policy.Elevated })
	pd := mkTemp(t, "programdata")
	t.Setenv("ProgramData", pd)
	return pol, pd
}

// writeMarker records a setup in pd as agentbox-setup would.
func writeMarker(t *testing.T, pd string, m *winsetup.Marker) {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, filepath.Join(pd, "agentbox", winsetup.MarkerFile), b)
}

func writeState(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func validMarker() *winsetup.Marker {
	return &winsetup.Marker{Version: winsetup.Version, CreatedAt: time.Now().UTC(),
		OfflineSID: "S-1-5-21-1-2-3-1001", OnlineSID: "S-1-5-21-1-2-3-1002", GroupSID: testGroupSID,
		Runner: `C:\ProgramData\agentbox\bin\agentbox-runner.exe`, RealUserSID: "S-1-5-21-1-2-3-1000"}
}

// runElevated runs the echo helper and returns the error.
func runElevated(t *testing.T, pol *policy.Policy) error {
	t.Helper()
	c := Command(pol, exe(t))
	c.Env = helperEnv("echo")
	return c.Run()
}

// TestElevatedWithoutSetup: no marker means exit status 125, an error that
// says to run `agentbox setup`, and nothing touched on disk.
func TestElevatedWithoutSetup(t *testing.T) {
	pol, _ := elevatedPolicy(t, policy.WorkspaceWrite)
	err := runElevated(t, pol)
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeSandboxFailure {
		t.Fatalf("Run = %v, want StartError 125", err)
	}
	if !errors.Is(err, winsetup.ErrMissing) || !strings.Contains(err.Error(), "run `agentbox setup`") {
		t.Errorf("error %q does not say to run agentbox setup", err)
	}
	dir := stateDir()
	if _, err := sid.Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused run created or changed the SID state: %v", err)
	}
}

// TestElevatedOutdatedSetup: an old or incomplete marker also stops the
// run (a marker without the proxy range that an allow-list needs:
// TestElevatedAllowListNeedsProxyPorts).
func TestElevatedOutdatedSetup(t *testing.T) {
	for name, edit := range map[string]func(*winsetup.Marker){
		"old version": func(m *winsetup.Marker) { m.Version = winsetup.Version - 1 },
		"no group":    func(m *winsetup.Marker) { m.GroupSID = "" },
	} {
		t.Run(name, func(t *testing.T) {
			pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
			m := validMarker()
			edit(m)
			writeMarker(t, pd, m)
			err := runElevated(t, pol)
			var se *StartError
			if !errors.As(err, &se) || se.Code != CodeSandboxFailure || !errors.Is(err, winsetup.ErrOutdated) {
				t.Fatalf("Run = %v, want StartError 125 wrapping ErrOutdated", err)
			}
			if !strings.Contains(err.Error(), "run `agentbox setup` again") {
				t.Errorf("error %q does not say to re-run agentbox setup", err)
			}
		})
	}
}

// TestElevatedGrantsGroup: with a marker but no credentials the run still
// fails with 125 (the credentials are missing), but only after the
// writable roots were granted to the synthetic SID and the sandbox group,
// the protected paths denied to both, and the paths recorded for cleanup.
// Cleanup then keeps that record while agentbox-setup cannot run.
// stubFirewall makes the firewall check return err for the test.
func stubFirewall(t *testing.T, err error) {
	old := checkFirewall
	checkFirewall = func(context.Context) error { return err }
	t.Cleanup(func() { checkFirewall = old })
}

// Offline elevated runs need the firewall to enforce the Offline user's
// rules right now; otherwise they refuse before starting anything.
func TestElevatedRefusesWithoutFirewall(t *testing.T) {
	pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
	writeMarker(t, pd, validMarker())
	stubFirewall(t, fmt.Errorf("%w: Public profile: firewall not enabled (Enabled=False)", winsetup.ErrFirewall))
	c := Command(pol, exe(t))
	c.Env = helperEnv("echo")
	err := c.Run()
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeSandboxFailure || !errors.Is(err, winsetup.ErrFirewall) ||
		!strings.Contains(err.Error(), "network off") {
		t.Fatalf("Run = %v, want StartError 125 wrapping ErrFirewall", err)
	}
	// With the network on there is nothing for the firewall to enforce.
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Network = true })
	c = Command(pol, exe(t))
	c.Env = helperEnv("echo")
	if err := c.Run(); errors.Is(err, winsetup.ErrFirewall) {
		t.Errorf("network-on run refused for the firewall: %v", err)
	}
	// Doctor does not claim enforcement.
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Network = false })
	r := Doctor(pol)
	if c, _ := check(r, "network"); c.OK || !strings.Contains(c.Detail, "NOT enforced") || r.CanSandbox {
		t.Errorf("doctor with the firewall off: %+v (can sandbox %v)", c, r.CanSandbox)
	}
}

// Unstubbed, under Wine (no firewall, no PowerShell), the check fails
// closed.
func TestFirewallCheckFailsClosedUnderWine(t *testing.T) {
	if !winapi.IsWine() {
		t.Skip("Wine only: a real host has a firewall to read")
	}
	if err := checkFirewall(context.Background()); !errors.Is(err, winsetup.ErrFirewall) {
		t.Errorf("checkFirewall under Wine = %v, want ErrFirewall", err)
	}
}

func TestElevatedGrantsGroup(t *testing.T) {
	pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
	writeMarker(t, pd, validMarker())
	stubFirewall(t, nil)
	var diag bytes.Buffer
	c := Command(pol, exe(t))
	c.Env = helperEnv("echo")
	c.Diagnostics = &diag
	err := c.Run()
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeSandboxFailure || !errors.Is(err, winsetup.ErrMissing) {
		t.Fatalf("Run = %v, want StartError 125 wrapping ErrMissing (no credentials)", err)
	}
	dir := stateDir()
	st, err := sid.Load(dir)
	if err != nil {
		t.Fatalf("SID state: %v", err)
	}
	ws, git := acl.Clean(pol.Cwd()), acl.Clean(filepath.Join(pol.Cwd(), ".git"))
	for _, p := range []string{ws, git} {
		if !containsFold(st.Paths, p) {
			t.Errorf("%s not recorded for cleanup: %v", p, st.Paths)
		}
	}
	if !strings.Contains(diag.String(), winsetup.Group) || !strings.Contains(diag.String(), "in the background") {
		t.Errorf("diagnostics %q", diag.String())
	}
	rootSID, ok := st.LookupRoot(pol.Cwd())
	if !ok {
		t.Fatalf("no SID for the workspace %s in %+v", pol.Cwd(), st.Roots)
	}
	// The private tool caches are granted as a writable root: their own
	// SID, recorded for cleanup (which hands the paths to agentbox-setup
	// to revoke the group's ACE).
	cacheRoot := acl.Clean(filepath.Join(agentdirs.ToolCacheRoot(dir), agentdirs.WorkspaceKey(pol.Cwd()), "private"))
	if s, ok := st.LookupRoot(cacheRoot); !ok || s == rootSID || !containsFold(st.Paths, cacheRoot) {
		t.Errorf("private tool caches %s: SID %q (workspace %q), recorded %v", cacheRoot, s, rootSID, st.Paths)
	}
	checkGroupACEs(t, pol, dir, rootSID, ws, git)

	// agentbox-setup.exe is not next to the test binary, so the elevated
	// part of cleanup fails: the SID state (the paths to revoke) stays.
	var out bytes.Buffer
	err = Cleanup(context.Background(), &out)
	if err == nil || !strings.Contains(err.Error(), "state kept") {
		t.Fatalf("Cleanup = %v, want an elevated-cleanup failure that keeps the state", err)
	}
	if _, err := sid.Load(dir); err != nil {
		t.Errorf("SID state gone after a failed cleanup: %v", err)
	}
}

// checkGroupACEs reads the DACLs back. Wine accepts SetNamedSecurityInfo
// but stores nothing (it reads back a default DACL), so this needs a real
// host.
func checkGroupACEs(t *testing.T, pol *policy.Policy, dir, workspaceSID, ws, git string) {
	t.Helper()
	if winapi.IsWine() {
		t.Log("ACEs on disk unverified under Wine: it does not store DACLs; the recorded paths were checked")
		return
	}
	for _, c := range []struct {
		path string
		deny bool
	}{{ws, false}, {git, true}} {
		sddl, err := winapi.FileStore{}.GetDACL(c.path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := acl.ParseDACL(sddl)
		if err != nil {
			t.Fatalf("%s: %v", sddl, err)
		}
		for _, s := range []string{workspaceSID, testGroupSID} {
			if !hasACE(d, s, c.deny) {
				t.Errorf("%s: no %s ACE (deny=%v) for %s in %s", c.path, map[bool]string{false: "allow", true: "deny"}[c.deny], c.deny, s, sddl)
			}
		}
	}
	// A second run finds every grant in place.
	sb, err := unelevated.PrepareACL(pol, dir, testGroupSID)
	if err != nil || len(sb.ACL.Modified) != 0 {
		t.Errorf("second PrepareACL modified %v, %v", sb.ACL.Modified, err)
	}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func hasACE(d *acl.DACL, sid string, deny bool) bool {
	for _, r := range d.ACEs {
		if r.OK && strings.EqualFold(r.Parsed.SID, sid) && r.Parsed.Deny == deny {
			return true
		}
	}
	return false
}

// TestCleanupWithoutElevatedSetup: with no elevated footprint, cleanup
// needs no UAC prompt and goes on to the unelevated state.
func TestCleanupWithoutElevatedSetup(t *testing.T) {
	if _, _, _, err := windows.LookupSID("", winsetup.OfflineUser); err == nil {
		t.Skipf("this machine has the %s user (elevated setup ran); cleanup would try to remove it", winsetup.OfflineUser)
	}
	pol, _ := elevatedPolicy(t, policy.WorkspaceWrite)
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Windows = policy.Unelevated })
	if err := runElevated(t, pol); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Cleanup(context.Background(), &out); err != nil {
		t.Fatalf("Cleanup: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "elevated sandbox: nothing to remove") || !strings.Contains(out.String(), sid.FileName) {
		t.Errorf("cleanup output:\n%s", out.String())
	}
	dir := stateDir()
	if _, err := sid.Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SID state after cleanup: %v", err)
	}
}

func check(r *Report, name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// TestDoctorElevated: doctor reports the setup marker (missing, outdated,
// ok), the read-grant progress and the firewall-enforced network block.
func TestDoctorElevated(t *testing.T) {
	pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
	stubFirewall(t, nil)

	r := Doctor(pol)
	if !strings.HasPrefix(r.Backend, "elevated") || r.CanSandbox {
		t.Errorf("without setup: backend %q, can sandbox %v", r.Backend, r.CanSandbox)
	}
	if c, ok := check(r, "elevated setup"); !ok || c.OK || !strings.HasPrefix(c.Detail, "missing") || !strings.Contains(c.Detail, "agentbox setup") {
		t.Errorf("without setup: %+v", c)
	}
	if !slices.ContainsFunc(r.Missing, func(m string) bool { return strings.Contains(m, "agentbox setup") }) {
		t.Errorf("missing %q", r.Missing)
	}
	if c, ok := check(r, "network"); !ok || !c.OK || !strings.Contains(c.Detail, "Firewall") || !strings.Contains(c.Detail, "enforced") {
		t.Errorf("network check %+v", c)
	}
	if _, ok := check(r, "read grants"); ok {
		t.Error("read grants reported without a setup")
	}

	m := validMarker()
	m.Version = winsetup.Version + 1
	writeMarker(t, pd, m)
	if c, _ := check(Doctor(pol), "elevated setup"); c.OK || !strings.HasPrefix(c.Detail, "outdated") {
		t.Errorf("newer setup: %+v", c)
	}

	writeMarker(t, pd, validMarker())
	grants := filepath.Join(pd, "agentbox", winsetup.GrantsFile)
	g := &winsetup.Grants{Version: 1, Paths: []string{`C:\Users\u`, `C:\Windows`}}
	b, _ := g.Marshal()
	writeState(t, grants, b)
	r = Doctor(pol)
	if c, _ := check(r, "elevated setup"); !c.OK || !strings.HasPrefix(c.Detail, "ok") {
		t.Errorf("with setup: %+v", c)
	}
	if c, _ := check(r, "read grants"); !c.OK || !strings.Contains(c.Detail, "in progress") || !strings.Contains(c.Detail, "2 path") {
		t.Errorf("grants in progress: %+v", c)
	}
	if slices.ContainsFunc(r.Missing, func(m string) bool { return strings.Contains(m, "setup") }) {
		t.Errorf("missing %q with a valid setup", r.Missing)
	}
	g.Done = true
	b, _ = g.Marshal()
	writeState(t, grants, b)
	if c, _ := check(Doctor(pol), "read grants"); !c.OK || !strings.HasPrefix(c.Detail, "done") {
		t.Errorf("grants done: %+v", c)
	}

	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Network = true })
	if c, _ := check(Doctor(pol), "network"); !c.OK || !strings.Contains(c.Detail, winsetup.OnlineUser) {
		t.Errorf("network on: %+v", c)
	}
	// Unelevated mode says the block is only advisory.
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Network, f.Windows = false, policy.Unelevated })
	r = Doctor(pol)
	if _, ok := check(r, "elevated setup"); ok || strings.HasPrefix(r.Backend, "elevated") {
		t.Errorf("unelevated doctor reports elevated setup: %+v", r)
	}
	if c, _ := check(r, "network"); c.OK || !strings.Contains(c.Detail, "advice") {
		t.Errorf("unelevated network check %+v", c)
	}
}

// TestSetupElevatedNeedsExecutables: `agentbox setup` in elevated mode
// looks for agentbox-runner.exe and agentbox-setup.exe next to agentbox
// (here, the test binary) and says which is missing before any prompt.
func TestSetupElevatedNeedsExecutables(t *testing.T) {
	pol, _ := elevatedPolicy(t, policy.WorkspaceWrite)
	var out bytes.Buffer
	err := Setup(context.Background(), pol, &out)
	if err == nil || !strings.Contains(err.Error(), "agentbox-runner.exe not found") {
		t.Fatalf("Setup = %v, want agentbox-runner.exe not found", err)
	}
}

func TestUACDeclinedMessage(t *testing.T) {
	err := uacError(winsetup.ErrCancelled, "nothing was set up")
	if !errors.Is(err, winsetup.ErrCancelled) || !strings.Contains(err.Error(), "UAC prompt was declined, so nothing was set up") {
		t.Errorf("declined prompt: %v", err)
	}
	other := errors.New("boom")
	if uacError(other, "x") != other {
		t.Error("other errors must pass through unchanged")
	}
}

// TestElevatedOnHost runs commands for real in elevated mode. It needs a
// Windows host where `agentbox setup` completed (read grants included)
// and AGENTBOX_TEST_ELEVATED=1; the test binary and its temporary
// workspace lie under the profile, which the read grants cover.
func TestElevatedOnHost(t *testing.T) {
	if winapi.IsWine() {
		t.Skip("Wine fakes users, logon and ACL enforcement; needs a real Windows host")
	}
	if os.Getenv("AGENTBOX_TEST_ELEVATED") != "1" {
		t.Skip("set AGENTBOX_TEST_ELEVATED=1 on a host where `agentbox setup` ran to run elevated commands for real")
	}
	st := winsetup.GetStatus()
	if st.Err != nil || !st.GrantsDone {
		t.Skipf("elevated setup not usable here: %v (read grants done: %v)", st.Err, st.GrantsDone)
	}
	pol, base := testPolicy(t, policy.WorkspaceWrite)
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Windows = policy.Elevated })
	t.Cleanup(func() { Cleanup(context.Background(), &bytes.Buffer{}) })

	c := Command(pol, exe(t), "a b", `q"uote`)
	c.Env = helperEnv("echo", "AGENTBOX_TEST_CODE=3")
	c.Stdin = strings.NewReader("over stdin")
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || out.String() != "over stdin" || errb.String() != `a b|q"uote` {
		t.Fatalf("Run = %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
	ws, outside := pol.Cwd(), filepath.Join(base, "outside")
	for _, c := range []struct {
		name, helper string
		args         []string
		want         bool
	}{
		{"write in workspace", "write", []string{filepath.Join(ws, "new.txt")}, true},
		{"write outside", "write", []string{filepath.Join(outside, "new.txt")}, false},
		{"write .git\\config", "write", []string{filepath.Join(ws, ".git", "config")}, false},
		{"rename .git aside", "rename", []string{filepath.Join(ws, ".git"), filepath.Join(ws, ".git-aside")}, false},
		{"read outside", "read", []string{filepath.Join(outside, "file.txt")}, true},
	} {
		if got := sandboxed(t, pol, c.helper, c.args...); got != c.want {
			t.Errorf("%s: succeeded=%v, want %v", c.name, got, c.want)
		}
	}
	if err := Command(pol, "agentbox-no-such-program").Run(); !isStartCode(err, CodeNotFound) {
		t.Errorf("missing program: %v, want StartError 127", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c = CommandContext(ctx, pol, exe(t))
	c.Env = helperEnv("sleep")
	if err := c.Run(); !errors.As(err, &ee) || !ee.TimedOut || ee.ExitCode() != 137 {
		t.Errorf("timeout: %v, want a timed-out ExitError with status 137", err)
	}
}

func isStartCode(err error, code int) bool {
	var se *StartError
	return errors.As(err, &se) && se.Code == code
}
