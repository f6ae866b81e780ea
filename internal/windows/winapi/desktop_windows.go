package winapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
)

// _UOI_NAME is GetUserObjectInformation's index for an object's name.
const _UOI_NAME = 2

// Desktop is a private desktop on the caller's window station, created for
// one run so that the sandboxed tree shares no desktop (window messages,
// hooks, SendInput, journal playback) with the user's programs.
type Desktop struct {
	h windows.Handle
	// Name is "winsta\desktop", the form STARTUPINFO.lpDesktop takes when
	// it names the window station as well (a backslash in lpDesktop means
	// both are given).
	Name string
}

// NewDesktop creates a desktop with a random name on the current window
// station whose DACL grants logonSID, and nothing else, full access (see
// acl.DesktopDACL). The caller closes it once the run is over; Windows
// destroys it when its last handle and its last thread are gone.
func NewDesktop(logonSID *windows.SID) (*Desktop, error) {
	ws, err := getProcessWindowStation()
	if err != nil {
		return nil, os.NewSyscallError("GetProcessWindowStation", err)
	}
	station, err := objectName(ws) // not closed: GetProcessWindowStation's handle is the process's own
	if err != nil {
		return nil, err
	}
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := "agentbox-" + hex.EncodeToString(rnd[:])
	sddl := acl.DesktopDACL(logonSID.String())
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return nil, fmt.Errorf("desktop DACL %q: %w", sddl, err)
	}
	sa := windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	h, err := createDesktop(n, nil, 0, 0, acl.DesktopAllAccess, &sa)
	runtime.KeepAlive(sd)
	if err != nil {
		return nil, os.NewSyscallError("CreateDesktopW", err)
	}
	return &Desktop{h: h, Name: station + `\` + name}, nil
}

// Close closes agentbox's handle on the desktop.
func (d *Desktop) Close() error {
	if d == nil || d.h == 0 {
		return nil
	}
	err := closeDesktop(d.h)
	d.h = 0
	return os.NewSyscallError("CloseDesktop", err)
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
