package winapi

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// privateDesktop is NewDesktop for the current logon SID, closed at the
// end of the test.
func privateDesktop(t *testing.T) *Desktop {
	t.Helper()
	self, err := OpenSelfToken()
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	logon, err := LogonSID(self)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDesktop(logon)
	if err != nil {
		t.Fatalf("NewDesktop: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The child never shares the caller's console: CREATE_NO_WINDOW gives a
// console program a hidden console of its own (DETACHED_PROCESS would
// leave it none, and some programs then open CONOUT$ and fail).
func TestCreationFlagsNoSharedConsole(t *testing.T) {
	if CreationFlags&windows.CREATE_NO_WINDOW == 0 {
		t.Error("CreationFlags lacks CREATE_NO_WINDOW")
	}
	if CreationFlags&(windows.DETACHED_PROCESS|windows.CREATE_NEW_CONSOLE) != 0 {
		t.Error("CreationFlags has DETACHED_PROCESS or CREATE_NEW_CONSOLE (CREATE_NO_WINDOW is ignored with them)")
	}
	if CreationFlags&windows.CREATE_SUSPENDED == 0 {
		t.Error("CreationFlags lacks CREATE_SUSPENDED")
	}
}

func TestNewDesktopName(t *testing.T) {
	d := privateDesktop(t)
	station, name, ok := strings.Cut(d.Name, `\`)
	if !ok || station == "" || !strings.HasPrefix(name, "agentbox-") || strings.Contains(name, `\`) {
		t.Errorf("desktop name %q, want winsta\\agentbox-<random>", d.Name)
	}
	if d2 := privateDesktop(t); d2.Name == d.Name {
		t.Errorf("two desktops share the name %q", d.Name)
	}
}

func TestSpawnRefusesConsoleAndDefaultDesktop(t *testing.T) {
	tok, _ := restricted(t)
	job, err := NewJob()
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	in, out := newPipe(t), newPipe(t)
	base := Spec{Token: tok, App: `C:\windows\system32\cmd.exe`, CmdLine: "cmd /c exit", Job: job,
		Stdin: windows.Handle(in.r.Fd()), Stdout: windows.Handle(out.w.Fd()), Stderr: windows.Handle(out.w.Fd())}
	if _, err := Spawn(base); err == nil || !strings.Contains(err.Error(), "desktop") {
		t.Errorf("Spawn without a private desktop: %v, want a refusal", err)
	}
	con, err := consoleHandle()
	if err != nil {
		t.Skipf("no console handle to test with: %v", err)
	}
	defer windows.CloseHandle(con)
	s := base
	s.Desktop = privateDesktop(t).Name
	s.Stdout = con
	if _, err := Spawn(s); !errors.Is(err, ErrConsoleHandle) {
		t.Errorf("Spawn with a console stdout: %v, want ErrConsoleHandle", err)
	}
}

// consoleHandle opens CONOUT$, allocating a console when the test has
// none.
func consoleHandle() (windows.Handle, error) {
	open := func() (windows.Handle, error) {
		return windows.CreateFile(windows.StringToUTF16Ptr("CONOUT$"), windows.GENERIC_READ|windows.GENERIC_WRITE,
			windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
	}
	h, err := open()
	if err == nil && IsConsole(h) {
		return h, nil
	}
	if err == nil {
		windows.CloseHandle(h)
	}
	if r, _, err := procAllocConsole.Call(); r == 0 {
		return 0, err
	}
	h, err = open()
	if err != nil {
		return 0, err
	}
	if !IsConsole(h) {
		windows.CloseHandle(h)
		return 0, errors.New("CONOUT$ is not a console")
	}
	return h, nil
}

var (
	procGetConsoleProcessList = windows.NewLazySystemDLL("kernel32.dll").NewProc("GetConsoleProcessList")
	procAllocConsole          = windows.NewLazySystemDLL("kernel32.dll").NewProc("AllocConsole")
)

// consolePIDs lists the processes attached to the caller's console.
func consolePIDs() []uint32 {
	pids := make([]uint32, 64)
	n, _, _ := procGetConsoleProcessList.Call(uintptr(unsafe.Pointer(&pids[0])), uintptr(len(pids)))
	if n == 0 || int(n) > len(pids) {
		return nil
	}
	return pids[:n]
}

// The child's console (if it has one) is not this process's: the test
// makes sure it has a console, then the child lists the processes on
// its own.
func TestChildDoesNotShareConsole(t *testing.T) {
	if h, err := consoleHandle(); err != nil {
		t.Skipf("no console to share: %v", err)
	} else {
		windows.CloseHandle(h)
	}
	tok, _ := restricted(t)
	in, out, errp := newPipe(t), newPipe(t), newPipe(t)
	p, _ := spawn(t, tok, "consolepids", in.r, out.w, errp.w, nil)
	in.w.Close()
	out.w.Close()
	errp.w.Close()
	b, _ := io.ReadAll(out.r)
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	for _, f := range strings.Fields(string(b)) {
		if f == me {
			t.Errorf("the child shares this process's console (console pids %s)", b)
		}
	}
}

func TestJobUIRestrictions(t *testing.T) {
	j, err := NewJob()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.Limits.Nested {
		t.Skipf("this test process already runs inside a job (CI runners do), so NewJob leaves the UI restrictions out by design (%s); run it outside a job to check them", j.Limits)
	}
	if !j.UIRestricted {
		if !IsWine() {
			t.Fatal("job has no UI restrictions outside Wine")
		}
		t.Skip("UI restrictions unverified under Wine: " + ErrWineUI.Error() + " (NewJob fails closed on Windows)")
	}
	var ui windows.JOBOBJECT_BASIC_UI_RESTRICTIONS
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicUIRestrictions,
		uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui)), nil); err != nil {
		if IsWine() {
			// Wine 8 accepts the restrictions (a stub) but cannot report them.
			t.Skipf("UI restrictions unverified under Wine: QueryInformationJobObject(JobObjectBasicUIRestrictions): %v", err)
		}
		t.Fatal(err)
	}
	if ui.UIRestrictionsClass != UIRestrictions {
		t.Errorf("UI restrictions %#x, want %#x", ui.UIRestrictionsClass, UIRestrictions)
	}
}
