package setup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/winapi"
)

// underWine reports whether the test runs under Wine, which fakes users,
// logon, ACL enforcement and the firewall (see scripts/test-windows.sh).
func underWine() bool {
	if os.Getenv("AGENTBOX_WINE") == "1" {
		return true
	}
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

func TestDPAPIRoundTrip(t *testing.T) {
	secret := []byte("correct horse battery staple \x00\xff")
	blob, err := protect(secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, secret[:10]) {
		t.Fatal("DPAPI blob contains the plaintext")
	}
	got, err := unprotect(blob)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("unprotect = %q, %v", got, err)
	}
	blob[len(blob)-1] ^= 0xff
	if _, err := unprotect(blob); err == nil {
		t.Fatal("tampered blob decrypted")
	}
}

// TestStateRoundTrip runs the setup state handling (directories with their
// security descriptors, credentials through DPAPI, marker, login) on a
// temporary base directory.
func TestStateRoundTrip(t *testing.T) {
	if !underWine() && !windows.GetCurrentProcessToken().IsElevated() {
		t.Skip("making Administrators the owner of the state directories needs an elevated process")
	}
	base := filepath.Join(tempDir(t), "agentbox")
	me, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	group := "S-1-5-21-1-2-3-1003"
	if err := makeStateDirs(base, me.User.Sid.String(), group); err != nil {
		t.Fatal(err)
	}
	sd, err := windows.GetNamedSecurityInfo(filepath.Join(base, SecretsDir), windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("secrets DACL: %s", sd)
	if !underWine() && !strings.Contains(sd.String(), "(D;OICI;FA;;;"+group+")") {
		t.Errorf("secrets directory does not deny the sandbox group: %s", sd)
	}
	off := Account{User: OfflineUser, SID: "S-1-5-21-1-2-3-1001"}
	on := Account{User: OnlineUser, SID: "S-1-5-21-1-2-3-1002"}
	if err := saveCreds(base, off, on, "off-pw", "on-pw"); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(base, CredsFile))
	if bytes.Contains(raw, []byte("off-pw")) || bytes.Contains(raw, []byte("on-pw")) {
		t.Fatal("password stored in clear")
	}
	a, pw, err := loadCreds(base, false)
	if err != nil || a.User != OfflineUser || pw != "off-pw" {
		t.Fatalf("offline: %+v %q %v", a, pw, err)
	}
	a, pw, err = loadCreds(base, true)
	if err != nil || a.User != OnlineUser || pw != "on-pw" {
		t.Fatalf("online: %+v %q %v", a, pw, err)
	}
	if _, _, err := loadCreds(tempDir(t), false); !errors.Is(err, ErrMissing) {
		t.Fatalf("no credentials file: %v", err)
	}

	if m, err := readMarker(base); m != nil || err != nil {
		t.Fatalf("marker before setup: %v, %v", m, err)
	}
	m := &Marker{Version: Version, OfflineSID: off.SID, OnlineSID: on.SID, GroupSID: group, Runner: `C:\r.exe`}
	if err := writeJSON(filepath.Join(base, MarkerFile), m); err != nil {
		t.Fatal(err)
	}
	got, err := readMarker(base)
	if err != nil || CheckMarker(got, nil) != nil {
		t.Fatalf("marker: %+v, %v", got, err)
	}
	// Re-running over existing directories is fine (idempotent).
	if err := makeStateDirs(base, me.User.Sid.String(), group); err != nil {
		t.Fatal(err)
	}
}

// TestReadGrantsPass runs the read-grant pass over a temporary "profile"
// with the real DACL calls, and checks the record cleanup relies on.
func TestReadGrantsPass(t *testing.T) {
	root := tempDir(t)
	profile := filepath.Join(root, "Dev")
	for _, d := range []string{`.ssh`, `src\x`, `AppData\Roaming\Microsoft\Protect`, `AppData\Roaming\npm`} {
		if err := os.MkdirAll(filepath.Join(profile, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Join(root, "base")
	os.MkdirAll(filepath.Join(base, StateDir), 0o755)
	group := "S-1-5-21-1-2-3-1003"
	var log bytes.Buffer
	// Only the temporary tree: on a real host the system roots are
	// already readable, but a test has no business risking a DACL write
	// on C:\Windows.
	roots := []string{filepath.Join(root, "tools")}
	os.MkdirAll(roots[0], 0o755)
	st := winapi.FileStore{}
	if err := runReadGrants(context.Background(), base, profile, roots, group, st, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String())
	g, err := readGrants(base)
	if err != nil || !g.Done {
		t.Fatalf("grants file %+v, %v", g, err)
	}
	for _, p := range g.Paths {
		if strings.Contains(p, ".ssh") || strings.Contains(p, "Protect") {
			t.Errorf("excluded path granted: %s", p)
		}
	}
	if !containsFold(g.Paths, filepath.Join(profile, "src")) && !strings.Contains(log.String(), "src: already readable") {
		t.Errorf("src neither granted nor already readable:\n%s", log.String())
	}
	if underWine() {
		t.Log("Wine does not store ACEs for unknown SIDs; skipping the on-disk and second-run checks")
		return
	}
	sddl, _ := st.GetDACL(filepath.Join(profile, "src"))
	d, _ := acl.ParseDACL(sddl)
	if !Readable(d, Grant{Path: "src", Inherit: true}, group) {
		t.Errorf("src not readable by the group after the pass: %s", sddl)
	}
	// A second pass writes nothing.
	log.Reset()
	if err := runReadGrants(context.Background(), base, profile, roots, group, st, &log); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "granted read") {
		t.Errorf("second pass granted again:\n%s", log.String())
	}
	// Cleanup's revoke removes them.
	if _, err := acl.Revoke(st, g.Paths, group); err != nil {
		t.Fatal(err)
	}
}

func TestMainRejectsBadPayload(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"not-base64!"}, &out); code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	if code := Main(nil, &out); code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
}

func TestGetStatusWithoutSetup(t *testing.T) {
	t.Setenv("ProgramData", tempDir(t))
	st := GetStatus()
	if !errors.Is(st.Err, ErrMissing) || st.Marker != nil {
		t.Fatalf("status %+v", st)
	}
	if _, err := LoadLogin(false, nil); !errors.Is(err, ErrMissing) {
		t.Fatalf("LoadLogin without setup: %v", err)
	}
}

// The following need a real Windows host with administrator rights: Wine
// stubs NetUserAdd/LogonUser, ignores ACLs and has no firewall COM/WMI.

func requireRealAdmin(t *testing.T) {
	t.Helper()
	if underWine() {
		t.Skip("Wine fakes users, ACL enforcement and the firewall; needs a real Windows host")
	}
	if !windows.GetCurrentProcessToken().IsElevated() {
		t.Skip("needs an elevated (administrator) test process on a real Windows host")
	}
	if os.Getenv("AGENTBOX_TEST_ELEVATED_SETUP") != "1" {
		t.Skip("changes machine state (users, firewall); set AGENTBOX_TEST_ELEVATED_SETUP=1 to run")
	}
}

func TestFirewallRulesOnHost(t *testing.T) {
	requireRealAdmin(t)
	ctx := context.Background()
	var out bytes.Buffer
	sid := "S-1-5-21-1-2-3-4242" // not a real account: the rules match nobody
	if err := ensureFirewall(ctx, sid, []int{3128}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Second run finds them correct and changes nothing.
	out.Reset()
	if err := ensureFirewall(ctx, sid, []int{3128}, &out); err != nil || !strings.Contains(out.String(), "already correct") {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	// Drift: narrow to no proxy; the old split rules are replaced.
	if err := ensureFirewall(ctx, sid, nil, &out); err != nil {
		t.Fatal(err)
	}
	names, err := removeFirewall(ctx)
	if err != nil || len(names) != 1 {
		t.Fatalf("remove: %v %v", names, err)
	}
}

func TestUsersOnHost(t *testing.T) {
	requireRealAdmin(t)
	name := "AgentboxTestUser"
	pw, _ := NewPassword()
	if _, err := ensureUser(name, pw, "agentbox test"); err != nil {
		t.Fatal(err)
	}
	defer deleteUser(name)
	pw2, _ := NewPassword()
	if created, err := ensureUser(name, pw2, "agentbox test"); err != nil || created {
		t.Fatalf("rotate: created=%v %v", created, err)
	}
	if _, err := lookupSID(name); err != nil {
		t.Fatal(err)
	}
	if existed, err := deleteUser(name); !existed || err != nil {
		t.Fatalf("delete: %v %v", existed, err)
	}
	if existed, err := deleteUser(name); existed || err != nil {
		t.Fatalf("second delete: %v %v", existed, err)
	}
}
