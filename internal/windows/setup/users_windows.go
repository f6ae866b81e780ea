package setup

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// lmaccess.h structures and codes; x/sys/windows has none of them.
type userInfo1 struct {
	Name, Password    *uint16
	PasswordAge, Priv uint32
	HomeDir, Comment  *uint16
	Flags             uint32
	ScriptPath        *uint16
}

type userInfo1003 struct{ Password *uint16 }

type localGroupInfo1 struct{ Name, Comment *uint16 }

type localGroupMembersInfo0 struct{ Sid *windows.SID }

const (
	_USER_PRIV_USER        = 1
	_UF_SCRIPT             = 0x1
	_UF_PASSWD_CANT_CHANGE = 0x40
	_UF_DONT_EXPIRE_PASSWD = 0x10000

	_NERR_GroupNotFound    = 2220
	_NERR_UserNotFound     = 2221
	_NERR_GroupExists      = 2223
	_NERR_UserExists       = 2224
	_ERROR_NO_SUCH_ALIAS   = 1376
	_ERROR_MEMBER_IN_ALIAS = 1378
	_ERROR_ALIAS_EXISTS    = 1379
)

func isNetErr(err error, codes ...syscall.Errno) bool {
	var e syscall.Errno
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e == c {
			return true
		}
	}
	return false
}

// ensureGroup creates the local group if it does not exist.
func ensureGroup(name, comment string) (created bool, err error) {
	info := localGroupInfo1{Name: windows.StringToUTF16Ptr(name), Comment: windows.StringToUTF16Ptr(comment)}
	err = netLocalGroupAdd(nil, 1, (*byte)(unsafe.Pointer(&info)), nil)
	runtime.KeepAlive(&info)
	return netDone("NetLocalGroupAdd", name, err, _ERROR_ALIAS_EXISTS, _NERR_GroupExists)
}

// ensureUser creates the local user with password, or resets the password
// of the existing one: every setup run rotates the passwords.
func ensureUser(name, password, comment string) (created bool, err error) {
	pw := windows.StringToUTF16Ptr(password)
	info := userInfo1{
		Name: windows.StringToUTF16Ptr(name), Password: pw, Priv: _USER_PRIV_USER,
		Comment: windows.StringToUTF16Ptr(comment),
		Flags:   _UF_SCRIPT | _UF_DONT_EXPIRE_PASSWD | _UF_PASSWD_CANT_CHANGE,
	}
	err = netUserAdd(nil, 1, (*byte)(unsafe.Pointer(&info)), nil)
	runtime.KeepAlive(&info)
	if err == nil {
		return true, nil
	}
	if !isNetErr(err, _NERR_UserExists) {
		return false, fmt.Errorf("NetUserAdd(%s): %w", name, err)
	}
	set := userInfo1003{Password: pw}
	err = netUserSetInfo(nil, windows.StringToUTF16Ptr(name), 1003, (*byte)(unsafe.Pointer(&set)), nil)
	runtime.KeepAlive(&set)
	if err != nil {
		return false, fmt.Errorf("NetUserSetInfo(%s, password): %w", name, err)
	}
	return false, nil
}

// addMember adds sid to the local group; already a member is fine.
func addMember(group string, sid *windows.SID) error {
	m := localGroupMembersInfo0{Sid: sid}
	err := netLocalGroupAddMembers(nil, windows.StringToUTF16Ptr(group), 0, (*byte)(unsafe.Pointer(&m)), 1)
	runtime.KeepAlive(&m)
	if err != nil && !isNetErr(err, _ERROR_MEMBER_IN_ALIAS) {
		return fmt.Errorf("NetLocalGroupAddMembers(%s): %w", group, err)
	}
	return nil
}

func deleteUser(name string) (existed bool, err error) {
	return netDone("NetUserDel", name, netUserDel(nil, windows.StringToUTF16Ptr(name)), _NERR_UserNotFound)
}

func deleteGroup(name string) (existed bool, err error) {
	return netDone("NetLocalGroupDel", name, netLocalGroupDel(nil, windows.StringToUTF16Ptr(name)), _NERR_GroupNotFound, _ERROR_NO_SUCH_ALIAS)
}

// netDone maps the result of call on account name for a caller that
// wants the account made or gone: nil is true (this call did it), one of
// already (it was so before) is false, anything else an error.
func netDone(call, name string, err error, already ...syscall.Errno) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case isNetErr(err, already...):
		return false, nil
	}
	return false, fmt.Errorf("%s(%s): %w", call, name, err)
}

// lookupSID resolves a local account name to its SID.
func lookupSID(name string) (*windows.SID, error) {
	sid, _, _, err := windows.LookupSID("", name)
	if err != nil {
		return nil, fmt.Errorf("looking up account %s: %w", name, err)
	}
	return sid, nil
}

// usersGroupName is the localised name of BUILTIN\Users (S-1-5-32-545).
func usersGroupName() (string, error) {
	sid, err := windows.CreateWellKnownSid(windows.WinBuiltinUsersSid)
	if err != nil {
		return "", err
	}
	name, _, _, err := sid.LookupAccount("")
	if err != nil {
		return "", fmt.Errorf("looking up BUILTIN\\Users: %w", err)
	}
	return name, nil
}

const specialAccounts = `SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon\SpecialAccounts\UserList`

// hideUser keeps the account off the logon screen (value 0 under
// SpecialAccounts\UserList).
func hideUser(name string) error {
	k, _, err := registry.CreateKey(registry.LOCAL_MACHINE, specialAccounts, registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf("opening HKLM\\%s: %w", specialAccounts, err)
	}
	defer k.Close()
	if err := k.SetDWordValue(name, 0); err != nil {
		return fmt.Errorf("hiding %s from the logon screen: %w", name, err)
	}
	return nil
}

func unhideUser(name string) (existed bool, err error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, specialAccounts, registry.SET_VALUE)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer k.Close()
	err = k.DeleteValue(name)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return false, nil
	}
	return err == nil, err
}
