package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/policy"
)

// Security-descriptor writes from inside the sandbox. Whether a
// WRITE_RESTRICTED token counts WRITE_DAC and WRITE_OWNER as "write
// access" (so that the restricted pass, where the user's implicit owner
// rights do not apply, must allow them) is not documented; these tests
// settle it on a real host. Wine enforces no tokens, so they skip there.

// sdHelper runs the security-descriptor probes; -1 for unknown names.
// Each exits 0 when the change went through.
func sdHelper(name string, args []string) int {
	everyone, _ := windows.CreateWellKnownSid(windows.WinWorldSid)
	grantAll := func() (*windows.ACL, error) {
		return windows.ACLFromEntries([]windows.EXPLICIT_ACCESS{{
			AccessPermissions: windows.GENERIC_ALL, AccessMode: windows.GRANT_ACCESS,
			Trustee: windows.TRUSTEE{TrusteeForm: windows.TRUSTEE_IS_SID, TrusteeType: windows.TRUSTEE_IS_WELL_KNOWN_GROUP,
				TrusteeValue: windows.TrusteeValueFromSID(everyone)},
		}}, nil)
	}
	open := func(path string, access uint32) (windows.Handle, error) {
		return windows.CreateFile(windows.StringToUTF16Ptr(path), access,
			windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
			windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	}
	report := func(op string, err error) int {
		if err != nil {
			fmt.Println(op+":", err)
			return 1
		}
		fmt.Println(op + ": succeeded")
		return 0
	}
	switch name {
	case "writedac-open": // open args[0] for WRITE_DAC
		h, err := open(args[0], windows.WRITE_DAC)
		if err == nil {
			windows.CloseHandle(h)
		}
		return report("CreateFile(WRITE_DAC)", err)
	case "writeowner-open": // open args[0] for WRITE_OWNER
		h, err := open(args[0], windows.WRITE_OWNER)
		if err == nil {
			windows.CloseHandle(h)
		}
		return report("CreateFile(WRITE_OWNER)", err)
	case "setsecurityinfo": // grant Everyone full access on args[0] by handle
		h, err := open(args[0], windows.WRITE_DAC|windows.READ_CONTROL)
		if err != nil {
			return report("CreateFile(WRITE_DAC)", err)
		}
		defer windows.CloseHandle(h)
		acl, err := grantAll()
		if err != nil {
			return report("ACL", err)
		}
		return report("SetSecurityInfo(DACL)", windows.SetSecurityInfo(h, windows.SE_FILE_OBJECT,
			windows.DACL_SECURITY_INFORMATION|windows.UNPROTECTED_DACL_SECURITY_INFORMATION, nil, nil, acl, nil))
	case "setnamedsecurityinfo": // the same by name
		acl, err := grantAll()
		if err != nil {
			return report("ACL", err)
		}
		return report("SetNamedSecurityInfo(DACL)", windows.SetNamedSecurityInfo(args[0], windows.SE_FILE_OBJECT,
			windows.DACL_SECURITY_INFORMATION|windows.UNPROTECTED_DACL_SECURITY_INFORMATION, nil, nil, acl, nil))
	case "setowner": // make the current user the owner of args[0]
		u, err := windows.GetCurrentProcessToken().GetTokenUser()
		if err != nil {
			return report("GetTokenUser", err)
		}
		return report("SetNamedSecurityInfo(owner)", windows.SetNamedSecurityInfo(args[0], windows.SE_FILE_OBJECT,
			windows.OWNER_SECURITY_INFORMATION, u.User.Sid, nil, nil, nil))
	}
	return -1
}

func TestEnforceNoSecurityDescriptorWrites(t *testing.T) {
	requireEnforcement(t)
	pol, base := testPolicy(t, policy.WorkspaceWrite)
	outside := filepath.Join(base, "outside", "file.txt")
	git := filepath.Join(pol.Cwd(), ".git")
	gitConfig := filepath.Join(git, "config")
	for _, target := range []string{outside, filepath.Dir(outside), gitConfig, git} {
		for _, probe := range []string{"writedac-open", "writeowner-open", "setsecurityinfo", "setnamedsecurityinfo", "setowner"} {
			c := Command(pol, exe(t), target)
			c.Env = helperEnv(probe)
			out, err := c.CombinedOutput()
			if err == nil {
				t.Errorf("%s on %s succeeded in the sandbox: %s", probe, target, out)
			}
		}
	}
	// Nothing changed: the files are still not writable from the sandbox.
	if sandboxed(t, pol, "write", outside) {
		t.Error("the file outside the workspace became writable")
	}
	if sandboxed(t, pol, "write", gitConfig) {
		t.Error(".git\\config became writable")
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("outside file changed: %q", b)
	}
}
