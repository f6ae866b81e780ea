package winapi

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
)

// CreateRestrictedToken flags (winnt.h); x/sys/windows does not define them.
const (
	_DISABLE_MAX_PRIVILEGE = 0x1
	_LUA_TOKEN             = 0x4
	_WRITE_RESTRICTED      = 0x8
)

// OpenSelfToken opens the current process's primary token with the rights
// RestrictedToken and CreateProcessAsUser need.
func OpenSelfToken() (windows.Token, error) {
	var t windows.Token
	err := windows.OpenProcessToken(windows.CurrentProcess(),
		windows.TOKEN_DUPLICATE|windows.TOKEN_QUERY|windows.TOKEN_ASSIGN_PRIMARY|
			windows.TOKEN_ADJUST_DEFAULT|windows.TOKEN_ADJUST_SESSIONID|windows.TOKEN_ADJUST_PRIVILEGES, &t)
	if err != nil {
		return 0, os.NewSyscallError("OpenProcessToken", err)
	}
	return t, nil
}

// LogonSID returns the logon SID of t (S-1-5-5-X-Y): the token group whose
// attributes carry SE_GROUP_LOGON_ID. The window station, desktop and
// console grant it access, which is why it is a restricting SID.
func LogonSID(t windows.Token) (*windows.SID, error) {
	groups, err := t.GetTokenGroups()
	if err != nil {
		return nil, os.NewSyscallError("GetTokenInformation(TokenGroups)", err)
	}
	for _, g := range groups.AllGroups() {
		if g.Attributes&windows.SE_GROUP_LOGON_ID == windows.SE_GROUP_LOGON_ID {
			return g.Sid.Copy()
		}
	}
	return nil, errors.New("token has no logon SID")
}

// RestrictedToken is the recipe both Windows modes use: a primary token
// derived from base with WRITE_RESTRICTED (writes must also be allowed to
// one of the restricting SIDs; reads keep base's rights), every privilege
// but SeChangeNotifyPrivilege removed (DISABLE_MAX_PRIVILEGE), LUA_TOKEN,
// and restricting SIDs Everyone, base's logon SID and each of sandboxSIDs.
// Its default DACL grants the user, SYSTEM, the logon SID and the first
// sandbox SID (not Everyone) full access, so the child can use the pipes
// and other objects it creates and nobody outside the logon session can.
//
// The caller closes the returned token.
func RestrictedToken(base windows.Token, sandboxSIDs ...string) (windows.Token, error) {
	if len(sandboxSIDs) == 0 {
		return 0, errors.New("restricted token: no sandbox SID")
	}
	logon, err := LogonSID(base)
	if err != nil {
		return 0, fmt.Errorf("restricted token: %w", err)
	}
	var restrict []windows.SIDAndAttributes
	for _, s := range acl.RestrictingSIDs(logon.String(), sandboxSIDs...) {
		sid, err := windows.StringToSid(s)
		if err != nil {
			return 0, fmt.Errorf("restricted token: SID %q: %w", s, err)
		}
		restrict = append(restrict, windows.SIDAndAttributes{Sid: sid})
	}
	var nt windows.Token
	err = createRestrictedToken(base, _DISABLE_MAX_PRIVILEGE|_LUA_TOKEN|_WRITE_RESTRICTED,
		0, nil, 0, nil, uint32(len(restrict)), &restrict[0], &nt)
	runtime.KeepAlive(restrict)
	if err != nil {
		return 0, os.NewSyscallError("CreateRestrictedToken", err)
	}
	user, err := base.GetTokenUser()
	if err != nil {
		nt.Close()
		return 0, os.NewSyscallError("GetTokenInformation(TokenUser)", err)
	}
	if err := SetDefaultDACL(nt, acl.TokenDefaultDACL(user.User.Sid.String(), logon.String(), sandboxSIDs[0])); err != nil {
		nt.Close()
		return 0, err
	}
	return nt, nil
}

// tokenDefaultDacl is TOKEN_DEFAULT_DACL.
type tokenDefaultDacl struct {
	DefaultDacl *windows.ACL
}

// SetDefaultDACL sets t's default DACL from an SDDL string ("D:...").
func SetDefaultDACL(t windows.Token, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("default DACL %q: %w", sddl, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("default DACL %q: %w", sddl, err)
	}
	info := tokenDefaultDacl{DefaultDacl: dacl}
	err = setTokenInfo(t, windows.TokenDefaultDacl, "TokenDefaultDacl", (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	runtime.KeepAlive(sd)
	return err
}

// DefaultDACL reads t's default DACL back as SDDL.
func DefaultDACL(t windows.Token) (string, error) {
	buf, err := tokenInfo(t, windows.TokenDefaultDacl, "TokenDefaultDacl")
	if err != nil {
		return "", err
	}
	info := (*tokenDefaultDacl)(unsafe.Pointer(&buf[0]))
	if info.DefaultDacl == nil {
		return "D:NO_ACCESS_CONTROL", nil
	}
	sd, err := windows.NewSecurityDescriptor()
	if err != nil {
		return "", err
	}
	if err := sd.SetDACL(info.DefaultDacl, true, false); err != nil {
		return "", err
	}
	s := sd.String()
	runtime.KeepAlive(buf)
	return s, nil
}

// SetIntegrity lowers t's integrity level to rid (acl.LowIL, ...). A
// token's level can be lowered without any privilege; raising it needs
// SeTcbPrivilege. The unelevated sandbox runs its command at Low so that
// the mandatory integrity check, which a write-restricted token's DELETE
// and FILE_DELETE_CHILD do not escape, confines it to the Low-labelled
// writable roots (see acl.IntegrityPlan).
func SetIntegrity(t windows.Token, rid uint32) error {
	sid, err := windows.StringToSid(fmt.Sprintf("S-1-16-%d", rid))
	if err != nil {
		return fmt.Errorf("integrity SID: %w", err)
	}
	tml := windows.Tokenmandatorylabel{Label: windows.SIDAndAttributes{Sid: sid, Attributes: windows.SE_GROUP_INTEGRITY}}
	err = setTokenInfo(t, windows.TokenIntegrityLevel, "TokenIntegrityLevel", (*byte)(unsafe.Pointer(&tml)), tml.Size())
	runtime.KeepAlive(sid)
	return err
}

// Integrity returns t's integrity level RID.
func Integrity(t windows.Token) (uint32, error) {
	buf, err := tokenInfo(t, windows.TokenIntegrityLevel, "TokenIntegrityLevel")
	if err != nil {
		return 0, err
	}
	tml := (*windows.Tokenmandatorylabel)(unsafe.Pointer(&buf[0]))
	c := tml.Label.Sid.SubAuthorityCount()
	if c == 0 {
		return 0, errors.New("integrity SID has no RID")
	}
	rid := tml.Label.Sid.SubAuthority(uint32(c) - 1)
	runtime.KeepAlive(buf)
	return rid, nil
}

// tokenInfo reads t's information of class (named name in errors) into
// a buffer of the size the first call asks for. The caller keeps the
// buffer alive while it reads the pointers inside.
func tokenInfo(t windows.Token, class uint32, name string) ([]byte, error) {
	var n uint32
	windows.GetTokenInformation(t, class, nil, 0, &n)
	if n == 0 {
		return nil, errors.New("GetTokenInformation(" + name + "): empty")
	}
	buf := make([]byte, n)
	if err := windows.GetTokenInformation(t, class, &buf[0], n, &n); err != nil {
		return nil, os.NewSyscallError("GetTokenInformation("+name+")", err)
	}
	return buf, nil
}

// setTokenInfo sets t's information of class (named name in errors)
// from the size bytes at p; the caller keeps what p points into alive.
func setTokenInfo(t windows.Token, class uint32, name string, p *byte, size uint32) error {
	if err := windows.SetTokenInformation(t, class, p, size); err != nil {
		return os.NewSyscallError("SetTokenInformation("+name+")", err)
	}
	return nil
}
