package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

// UI isolation: the child gets a private desktop, no console of the
// user's, and a job with UI restrictions. The desktop test runs under
// Wine; what only Windows enforces (input injection, clipboard) is in the
// TestEnforce* tests, which skip under Wine.

var (
	user32                  = windows.NewLazySystemDLL("user32.dll")
	kernel32                = windows.NewLazySystemDLL("kernel32.dll")
	procGetThreadDesktop    = user32.NewProc("GetThreadDesktop")
	procGetUserObjectInfo   = user32.NewProc("GetUserObjectInformationW")
	procSendInput           = user32.NewProc("SendInput")
	procOpenClipboard       = user32.NewProc("OpenClipboard")
	procCloseClipboard      = user32.NewProc("CloseClipboard")
	procEmptyClipboard      = user32.NewProc("EmptyClipboard")
	procGetClipboardData    = user32.NewProc("GetClipboardData")
	procSetClipboardData    = user32.NewProc("SetClipboardData")
	procAllocConsole        = kernel32.NewProc("AllocConsole")
	procFreeConsole         = kernel32.NewProc("FreeConsole")
	procAttachConsole       = kernel32.NewProc("AttachConsole")
	procWriteConsoleInputW  = kernel32.NewProc("WriteConsoleInputW")
	procGetNumberOfConInput = kernel32.NewProc("GetNumberOfConsoleInputEvents")
	procGlobalAlloc         = kernel32.NewProc("GlobalAlloc")
	procGlobalLock          = kernel32.NewProc("GlobalLock")
	procGlobalUnlock        = kernel32.NewProc("GlobalUnlock")
)

const cfUnicodeText = 13

// uiHelper runs the UI probes; it returns -1 for names it does not know.
func uiHelper(name string, args []string) int {
	switch name {
	case "desktop": // print the thread's desktop name
		h, _, err := procGetThreadDesktop.Call(uintptr(windows.GetCurrentThreadId()))
		if h == 0 {
			fmt.Fprintln(os.Stderr, "GetThreadDesktop:", err)
			return 1
		}
		buf := make([]uint16, 256)
		var n uint32
		if r, _, err := procGetUserObjectInfo.Call(h, 2, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)*2), uintptr(unsafe.Pointer(&n))); r == 0 {
			fmt.Fprintln(os.Stderr, "GetUserObjectInformation:", err)
			return 1
		}
		fmt.Println(windows.UTF16ToString(buf))
		return 0
	case "consoleinject": // args[0] = agentbox's pid; exit 0 = injected
		injected := false
		if writeKey(windows.Handle(os.Stdin.Fd())) == nil {
			fmt.Println("injected through stdin")
			injected = true
		}
		pid, _ := strconv.Atoi(args[0])
		procFreeConsole.Call()
		if r, _, err := procAttachConsole.Call(uintptr(pid)); r == 0 {
			fmt.Println("AttachConsole:", err)
		} else if h, err := windows.CreateFile(windows.StringToUTF16Ptr("CONIN$"), windows.GENERIC_READ|windows.GENERIC_WRITE,
			windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0); err != nil {
			fmt.Println("CONIN$:", err)
		} else if err := writeKey(h); err != nil {
			fmt.Println("WriteConsoleInput:", err)
		} else {
			fmt.Println("injected through AttachConsole")
			injected = true
		}
		if injected {
			return 0
		}
		return 1
	case "sendinput": // exit 0 = an input event was inserted
		// One harmless key (F24) down and up.
		type keyInput struct {
			typ          uint32
			_            uint32
			vk, scan     uint16
			flags, time  uint32
			extra        uintptr
			_pad1, _pad2 uint32
		}
		in := []keyInput{{typ: 1, vk: 0x87}, {typ: 1, vk: 0x87, flags: 2}}
		n, _, err := procSendInput.Call(uintptr(len(in)), uintptr(unsafe.Pointer(&in[0])), unsafe.Sizeof(in[0]))
		fmt.Println("SendInput:", n, err)
		if n > 0 {
			return 0
		}
		return 1
	case "clipboard": // print the clipboard text; exit 0 = read
		if r, _, err := procOpenClipboard.Call(0); r == 0 {
			fmt.Println("OpenClipboard:", err)
			return 1
		}
		defer procCloseClipboard.Call()
		h, _, err := procGetClipboardData.Call(cfUnicodeText)
		if h == 0 {
			fmt.Println("GetClipboardData:", err)
			return 1
		}
		p, _, _ := procGlobalLock.Call(h)
		if p == 0 {
			return 1
		}
		defer procGlobalUnlock.Call(h)
		fmt.Println(windows.UTF16PtrToString((*uint16)(ptr(p))))
		return 0
	}
	return -1
}

// writeKey writes one key event ('x') into a console input buffer.
func writeKey(h windows.Handle) error {
	type keyEvent struct {
		eventType uint16
		_         uint16
		keyDown   int32
		repeat    uint16
		vk, scan  uint16
		char      uint16
		state     uint32
	}
	ev := keyEvent{eventType: 1, keyDown: 1, repeat: 1, vk: 'X', char: 'x'}
	var n uint32
	r, _, err := procWriteConsoleInputW.Call(uintptr(h), uintptr(unsafe.Pointer(&ev)), 1, uintptr(unsafe.Pointer(&n)))
	if r == 0 {
		return err
	}
	if n == 0 {
		return errors.New("no event written")
	}
	return nil
}

// Every sandboxed run is on a private desktop, not winsta0\default.
func TestPrivateDesktop(t *testing.T) {
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	c := Command(pol, exe(t))
	c.Env = helperEnv("desktop")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	name := strings.TrimSpace(string(out))
	if strings.EqualFold(name, "Default") || !strings.HasPrefix(name, "agentbox-") {
		t.Errorf("the command runs on desktop %q, want a private agentbox-<random> one", name)
	}
}

// consoleFile opens CONOUT$ or CONIN$, allocating a console when the test
// has none; it skips when there is no console to be had.
func consoleFile(t *testing.T, name string) *os.File {
	t.Helper()
	open := func() (windows.Handle, error) {
		return windows.CreateFile(windows.StringToUTF16Ptr(name), windows.GENERIC_READ|windows.GENERIC_WRITE,
			windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
	}
	h, err := open()
	if err != nil || !winapi.IsConsole(h) {
		if err == nil {
			windows.CloseHandle(h)
		}
		procAllocConsole.Call()
		if h, err = open(); err != nil || !winapi.IsConsole(h) {
			t.Skipf("no console: %v", err)
		}
	}
	f := os.NewFile(uintptr(h), name)
	t.Cleanup(func() { f.Close() })
	return f
}

// The command cannot put input into agentbox's console: its stdio is
// relayed through pipes, and it is not attached to agentbox's console.
func TestEnforceNoConsoleInjection(t *testing.T) {
	requireEnforcement(t)
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	conin, conout := consoleFile(t, "CONIN$"), consoleFile(t, "CONOUT$")
	windows.FlushConsoleInputBuffer(windows.Handle(conin.Fd()))
	c := Command(pol, exe(t), strconv.Itoa(os.Getpid()))
	c.Env = helperEnv("consoleinject")
	var sb strings.Builder
	c.Stdout, c.Stderr = &sb, conout // stderr is the console: relayed too
	// stdin is the console itself: it must reach the command as a pipe.
	c.Stdin = conin
	err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	err = c.Wait()
	if err == nil {
		t.Errorf("the command injected console input: %s", sb.String())
	}
	var n uint32
	procGetNumberOfConInput.Call(conin.Fd(), uintptr(unsafe.Pointer(&n)))
	if n != 0 {
		t.Errorf("agentbox's console input buffer holds %d event(s) after the run (%s)", n, sb.String())
	}
}

// The command cannot synthesise input (its desktop is not the input
// desktop, and the job forbids touching other processes' windows) nor
// read the user's clipboard (JOB_OBJECT_UILIMIT_READCLIPBOARD).
func TestEnforceNoSendInputOrClipboard(t *testing.T) {
	requireEnforcement(t)
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	if sandboxed(t, pol, "sendinput") {
		t.Error("SendInput succeeded in the sandbox")
	}
	const secret = "agentbox-clipboard-secret"
	if err := setClipboard(secret); err != nil {
		t.Skipf("cannot set the clipboard on this host: %v", err)
	}
	c := Command(pol, exe(t))
	c.Env = helperEnv("clipboard")
	out, err := c.CombinedOutput()
	if err == nil || strings.Contains(string(out), secret) {
		t.Errorf("the command read the clipboard: %v: %s", err, out)
	}
}

func setClipboard(s string) error {
	if r, _, err := procOpenClipboard.Call(0); r == 0 {
		return err
	}
	defer procCloseClipboard.Call()
	procEmptyClipboard.Call()
	u := windows.StringToUTF16(s)
	h, _, err := procGlobalAlloc.Call(0x0002, uintptr(len(u)*2)) // GMEM_MOVEABLE
	if h == 0 {
		return err
	}
	p, _, err := procGlobalLock.Call(h)
	if p == 0 {
		return err
	}
	copy(unsafe.Slice((*uint16)(ptr(p)), len(u)), u)
	procGlobalUnlock.Call(h)
	if r, _, err := procSetClipboardData.Call(cfUnicodeText, h); r == 0 {
		return err
	}
	return nil
}

// ptr turns a pointer Win32 returned as a uintptr (GlobalLock's) into
// an unsafe.Pointer.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
