package winapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
)

// GetUserObjectInformation indexes: an object's flags (USEROBJECTFLAGS)
// and name.
const (
	_UOI_FLAGS = 1
	_UOI_NAME  = 2
)

// stationMu serialises the SetProcessWindowStation dance in
// newOwnStation: the process window station is process-wide.
var stationMu sync.Mutex

// Desktop is a private desktop on the caller's window station, created for
// one run so that the sandboxed tree shares no desktop (window messages,
// hooks, SendInput, journal playback) with the user's programs.
type Desktop struct {
	h windows.Handle
	// station is the window station agentbox created for this desktop
	// when its own is not interactive (0 otherwise).
	station windows.Handle
	// Name is "winsta\desktop", the form STARTUPINFO.lpDesktop takes when
	// it names the window station as well (a backslash in lpDesktop means
	// both are given).
	Name string
}

// NewDesktop creates a desktop with a random name whose DACL grants
// logonSID (and the SIDs in more), and nothing else, full access (see
// acl.DesktopDACL). It is on the current window station when that is the
// interactive one; otherwise (a service, an OpenSSH session, session 0)
// on a new window station of its own granted to the same SIDs, since
// there a restricted token or another logon cannot connect to the
// current station and USER32 fails to initialise (0xC0000142). The
// caller closes it once the run is over; Windows destroys it when its
// last handle and its last thread are gone.
func NewDesktop(logonSID *windows.SID, more ...string) (*Desktop, error) {
	sids := append([]string{logonSID.String()}, more...)
	ws, own, err := processStation()
	if err != nil {
		return nil, err
	}
	if own {
		return newOwnStation(ws, sids)
	}
	station, err := objectName(ws) // not closed: GetProcessWindowStation's handle is the process's own
	if err != nil {
		return nil, err
	}
	h, name, err := createPrivateDesktop(sids)
	if err != nil {
		return nil, err
	}
	return &Desktop{h: h, Name: station + `\` + name}, nil
}

// NonInteractive reports whether this process's window station is not
// the interactive one (see NeedOwnStation).
func NonInteractive() (bool, error) {
	_, own, err := processStation()
	return own, err
}

// processStation returns this process's window station (the process's
// own handle: not to be closed) and whether a sandboxed desktop needs a
// station of its own (NeedOwnStation).
func processStation() (windows.Handle, bool, error) {
	ws, err := getProcessWindowStation()
	if err != nil {
		return 0, false, os.NewSyscallError("GetProcessWindowStation", err)
	}
	flags, err := stationFlags(ws)
	if err != nil {
		return 0, false, err
	}
	return ws, NeedOwnStation(flags), nil
}

func randomName() (string, error) {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return "agentbox-" + hex.EncodeToString(rnd[:]), nil
}

// createPrivateDesktop creates a desktop on the process's window station.
func createPrivateDesktop(sids []string) (windows.Handle, string, error) {
	name, err := randomName()
	if err != nil {
		return 0, "", err
	}
	sddl := acl.DesktopDACL(sids[0], sids[1:]...)
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return 0, "", fmt.Errorf("desktop DACL %q: %w", sddl, err)
	}
	sa := windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, "", err
	}
	h, err := createDesktop(n, nil, 0, 0, acl.DesktopAllAccess, &sa)
	runtime.KeepAlive(sd)
	if err != nil {
		return 0, "", os.NewSyscallError("CreateDesktopW", err)
	}
	if err := setUserObjectLabel(h); err != nil {
		closeDesktop(h)
		return 0, "", fmt.Errorf("desktop: %w", err)
	}
	return h, name, nil
}

// setUserObjectLabel gives a window station or desktop agentbox created
// acl.UserObjectLabel (Low), through the handle it was created with
// (DESKTOP_ALL_ACCESS and WINSTA_ALL_ACCESS include WRITE_OWNER).
func setUserObjectLabel(h windows.Handle) error {
	sd, err := windows.SecurityDescriptorFromString(acl.UserObjectLabel.SACL())
	if err != nil {
		return fmt.Errorf("label: %w", err)
	}
	sacl, _, err := sd.SACL()
	if err != nil {
		return fmt.Errorf("label: %w", err)
	}
	err = windows.SetSecurityInfo(h, windows.SE_WINDOW_OBJECT, windows.LABEL_SECURITY_INFORMATION, nil, nil, nil, sacl)
	runtime.KeepAlive(sd)
	if err != nil && !IsWine() { // Wine only: it keeps no labels (and enforces none)
		return os.NewSyscallError("SetSecurityInfo(LABEL)", err)
	}
	return nil
}

// newOwnStation creates a window station granted to sids and a private
// desktop on it. CreateDesktop works on the process's window station, so
// the process switches to the new one for that call and back.
func newOwnStation(cur windows.Handle, sids []string) (*Desktop, error) {
	name, err := randomName()
	if err != nil {
		return nil, err
	}
	sddl := acl.StationDACL(sids...)
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return nil, fmt.Errorf("window station DACL %q: %w", sddl, err)
	}
	sa := windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	ws, err := createWindowStation(n, 0, acl.StationAllAccess, &sa)
	runtime.KeepAlive(sd)
	if err != nil {
		return nil, os.NewSyscallError("CreateWindowStationW", err)
	}
	if err := setUserObjectLabel(ws); err != nil {
		closeWindowStation(ws)
		return nil, fmt.Errorf("window station: %w", err)
	}
	stationMu.Lock()
	defer stationMu.Unlock()
	if err := setProcessWindowStation(ws); err != nil {
		closeWindowStation(ws)
		return nil, os.NewSyscallError("SetProcessWindowStation", err)
	}
	h, desk, err := createPrivateDesktop(sids)
	if rerr := setProcessWindowStation(cur); rerr != nil && err == nil {
		closeDesktop(h)
		err = os.NewSyscallError("SetProcessWindowStation(restore)", rerr)
	}
	if err != nil {
		closeWindowStation(ws)
		return nil, err
	}
	return &Desktop{h: h, station: ws, Name: name + `\` + desk}, nil
}

// OwnStation reports whether the desktop is on a window station agentbox
// created because its own was not interactive.
func (d *Desktop) OwnStation() bool { return d != nil && d.station != 0 }

func stationFlags(ws windows.Handle) (uint32, error) {
	// USEROBJECTFLAGS: fInherit, fReserved (BOOLs), dwFlags.
	var f [3]uint32
	var n uint32
	if err := getUserObjectInformation(ws, _UOI_FLAGS, (*uint16)(unsafe.Pointer(&f[0])), uint32(unsafe.Sizeof(f)), &n); err != nil {
		return 0, os.NewSyscallError("GetUserObjectInformation(UOI_FLAGS)", err)
	}
	return f[2], nil
}

// Close closes agentbox's handle on the desktop.
func (d *Desktop) Close() error {
	if d == nil || d.h == 0 {
		return nil
	}
	err := os.NewSyscallError("CloseDesktop", closeDesktop(d.h))
	d.h = 0
	if d.station != 0 {
		err = errors.Join(err, os.NewSyscallError("CloseWindowStation", closeWindowStation(d.station)))
		d.station = 0
	}
	return err
}

// objectName is a window station's or desktop's name.
func objectName(h windows.Handle) (string, error) {
	var n uint32
	getUserObjectInformation(h, _UOI_NAME, nil, 0, &n)
	if n == 0 {
		return "", errors.New("GetUserObjectInformation(UOI_NAME): empty")
	}
	buf := make([]uint16, n/2+1)
	if err := getUserObjectInformation(h, _UOI_NAME, &buf[0], uint32(len(buf)*2), &n); err != nil {
		return "", os.NewSyscallError("GetUserObjectInformation(UOI_NAME)", err)
	}
	return windows.UTF16ToString(buf), nil
}

// IsConsole reports whether h is a console handle (GetConsoleMode
// succeeds only on those). A console handle must never reach a sandboxed
// child: with it the child could inject input into the user's shell
// (WriteConsoleInput) or read its screen buffer.
func IsConsole(h windows.Handle) bool {
	var mode uint32
	return windows.GetConsoleMode(h, &mode) == nil
}
