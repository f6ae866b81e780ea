package elevated

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/agentbox/agentbox/internal/exitcode"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/loopguard"
	"github.com/agentbox/agentbox/internal/windows/setup"
)

// TestMain lets the test binary play agentbox-runner and the sandboxed
// command.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTBOX_TEST_RUNNER") == "1" {
		os.Exit(RunnerMain(os.Args[1:]))
	}
	if mode := os.Getenv("AGENTBOX_TEST_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func child(mode string) int {
	verb, arg, _ := strings.Cut(mode, ":")
	switch verb {
	case "echo":
		fmt.Print("hello")
		fmt.Fprint(os.Stderr, "oops")
		return 3
	case "cat":
		io.Copy(os.Stdout, os.Stdin)
		return 0
	case "sleep":
		time.Sleep(time.Hour)
		return 0
	case "injob":
		var in int32
		if err := isProcessInJob(windows.CurrentProcess(), 0, &in); err != nil {
			fmt.Print("err:", err)
			return 1
		}
		fmt.Printf("injob=%d", in)
		return 0
	case "dial":
		c, err := net.DialTimeout("tcp", arg, 5*time.Second)
		if err != nil {
			fmt.Print("dial failed: ", err)
			return 1
		}
		c.Close()
		fmt.Print("connected")
		return 0
	case "desktop":
		h, _, err := procGetThreadDesktop.Call(uintptr(windows.GetCurrentThreadId()))
		if h == 0 {
			fmt.Print("GetThreadDesktop: ", err)
			return 1
		}
		buf := make([]uint16, 256)
		var n uint32
		if r, _, err := procGetUserObjectInformation.Call(h, 2, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)*2), uintptr(unsafe.Pointer(&n))); r == 0 {
			fmt.Print("GetUserObjectInformation: ", err)
			return 1
		}
		fmt.Print(windows.UTF16ToString(buf))
		return 0
	case "write":
		if err := os.WriteFile(arg, []byte("x"), 0o644); err != nil {
			fmt.Print("write failed: ", err)
			return 1
		}
		fmt.Print("written")
		return 0
	}
	return 99
}

var (
	procGetThreadDesktop         = windows.NewLazySystemDLL("user32.dll").NewProc("GetThreadDesktop")
	procGetUserObjectInformation = windows.NewLazySystemDLL("user32.dll").NewProc("GetUserObjectInformationW")
)

// The runner puts the command on a private desktop of its own.
func TestRunnerPrivateDesktop(t *testing.T) {
	s := spec(t, "desktop")
	var out bytes.Buffer
	s.Stdout = &out
	p, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("code %d, %v: %s", code, err, out.String())
	}
	if name := out.String(); strings.EqualFold(name, "Default") || !strings.HasPrefix(name, "agentbox-") {
		t.Errorf("the command runs on desktop %q, want a private agentbox-<random> one", name)
	}
}

func underWine() bool {
	if os.Getenv("AGENTBOX_WINE") == "1" {
		return true
	}
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// selfLaunch starts the test binary as the runner under the current user:
// everything but the logon (CreateProcessWithLogonW, a stub under Wine).
func selfLaunch(t *testing.T) launcher {
	return func(args []string, dir string) (windows.Handle, uint32, error) {
		exe, err := os.Executable()
		if err != nil {
			return 0, 0, err
		}
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "AGENTBOX_TEST_RUNNER=1")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return 0, 0, err
		}
		h, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_DUP_HANDLE, false, uint32(cmd.Process.Pid))
		if err != nil {
			return 0, 0, err
		}
		go cmd.Wait()
		return h, uint32(cmd.Process.Pid), nil
	}
}

func selfSID(t *testing.T) string {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	return u.User.Sid.String()
}

func spec(t *testing.T, mode string) Spec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTBOX_TEST_RUNNER=") {
			env = append(env, kv)
		}
	}
	return Spec{Path: exe, Args: []string{"child"}, Env: append(env, "AGENTBOX_TEST_CHILD="+mode),
		SIDs: []string{"S-1-5-21-1-2-3-4"}}
}

func TestRunnerOutputAndExitCode(t *testing.T) {
	s := spec(t, "echo")
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	p, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() == 0 {
		t.Error("no command pid")
	}
	code, err := p.Wait()
	if err != nil || code != 3 || out.String() != "hello" || errb.String() != "oops" {
		t.Fatalf("code %d err %v stdout %q stderr %q", code, err, out.String(), errb.String())
	}
}

func TestRunnerStdin(t *testing.T) {
	s := spec(t, "cat")
	var out bytes.Buffer
	s.Stdin, s.Stdout = strings.NewReader(strings.Repeat("abc", 50000)), &out
	p, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	if err != nil || code != 0 || out.String() != strings.Repeat("abc", 50000) {
		t.Fatalf("code %d err %v, got %d bytes", code, err, out.Len())
	}
}

// TestRunnerChildInJob checks the command starts inside the runner's job
// (created suspended, assigned, then resumed).
func TestRunnerChildInJob(t *testing.T) {
	s := spec(t, "injob")
	var out bytes.Buffer
	s.Stdout = &out
	p, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 || out.String() != "injob=1" {
		t.Fatalf("code %d err %v out %q", code, err, out.String())
	}
}

// TestRunnerJobHandle: with proxy ports, Start hands back the command's
// job, duplicated from the runner, and it lists the command.
func TestRunnerJobHandle(t *testing.T) {
	s := spec(t, "sleep")
	s.ProxyPorts = []int{41630}
	p, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Kill()
	h := p.JobHandle()
	if h == 0 {
		t.Fatal("no job handle")
	}
	defer windows.CloseHandle(h)
	pids, err := loopguard.JobPIDs(h)
	if err != nil || !slices.Contains(pids, p.Pid()) {
		t.Fatalf("job lists %v (%v), want the command %d", pids, err, p.Pid())
	}
	// Without proxy ports nothing is duplicated.
	q, err := start(context.Background(), spec(t, "echo"), selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	q.Wait()
	if q.JobHandle() != 0 {
		t.Error("job handle without proxy ports")
	}
}

func TestRunnerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := start(ctx, spec(t, "sleep"), selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, cancel)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("cancelled command still running after 20s")
	}
}

func TestRunnerNotFound(t *testing.T) {
	s := spec(t, "echo")
	s.Path = `C:\does\not\exist.exe`
	_, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	var se *StartError
	if !errors.As(err, &se) || se.Code != exitcode.NotFound {
		t.Fatalf("err = %v", err)
	}
}

func TestRunnerNeverConnects(t *testing.T) {
	old := ConnectTimeout
	ConnectTimeout = 500 * time.Millisecond
	defer func() { ConnectTimeout = old }()
	// A "runner" that is some other process and never dials the pipe.
	launch := func(args []string, dir string) (windows.Handle, uint32, error) {
		s := spec(t, "sleep")
		cmd := exec.Command(s.Path)
		cmd.Env = s.Env
		if err := cmd.Start(); err != nil {
			return 0, 0, err
		}
		h, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.SYNCHRONIZE, false, uint32(cmd.Process.Pid))
		go cmd.Wait()
		return h, uint32(cmd.Process.Pid), err
	}
	start0 := time.Now()
	_, err := start(context.Background(), spec(t, "echo"), selfSID(t), launch)
	if err == nil || !strings.Contains(err.Error(), "did not connect") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start0) > 10*time.Second {
		t.Fatalf("took %v", time.Since(start0))
	}
}

func TestStartRequiresSID(t *testing.T) {
	s := spec(t, "echo")
	s.SIDs = nil
	if _, err := start(context.Background(), s, selfSID(t), selfLaunch(t)); err == nil {
		t.Fatal("started without a sandbox SID")
	}
}

func TestStartWithoutSetup(t *testing.T) {
	t.Setenv("ProgramData", os.TempDir()+`\agentbox-no-setup`)
	_, err := Start(context.Background(), spec(t, "echo"))
	if !errors.Is(err, setup.ErrMissing) {
		t.Fatalf("err = %v, want setup.ErrMissing", err)
	}
}

// The enforcement tests need a real Windows host on which `agentbox setup`
// has run, and an elevated test process (to place the test binary where
// the sandbox users can execute it).

func realSetup(t *testing.T) string {
	t.Helper()
	if underWine() {
		t.Skip("Wine stubs CreateProcessWithLogonW and has no firewall or ACL enforcement; needs a real Windows host")
	}
	if st := setup.GetStatus(); st.Err != nil {
		t.Skipf("elevated setup not usable on this host: %v", st.Err)
	}
	if !windows.GetCurrentProcessToken().IsElevated() {
		t.Skip("needs an elevated test process to copy the test binary where the sandbox users can run it")
	}
	exe, _ := os.Executable()
	dir := os.Getenv("ProgramData") + `\agentbox-test`
	os.MkdirAll(dir, 0o755)
	dst := dir + `\child.exe`
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dst); os.Remove(dir) })
	return dst
}

func runReal(t *testing.T, exe string, network bool, mode string) (uint32, string) {
	s := spec(t, mode)
	s.Path, s.Network, s.Dir = exe, network, os.Getenv("ProgramData")+`\agentbox-test`
	var out bytes.Buffer
	s.Stdout, s.Stderr = &out, &out
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

func TestOfflineUserCannotConnectOut(t *testing.T) {
	exe := realSetup(t)
	if code, out := runReal(t, exe, false, "dial:1.1.1.1:443"); code == 0 {
		t.Fatalf("Offline user connected out: %s", out)
	}
}

func TestOnlineUserCanConnectOut(t *testing.T) {
	exe := realSetup(t)
	if code, out := runReal(t, exe, true, "dial:1.1.1.1:443"); code != 0 {
		t.Fatalf("Online user could not connect (is this host online?): %s", out)
	}
}

func TestWritesConfined(t *testing.T) {
	exe := realSetup(t)
	// The synthetic SID holds no grant anywhere, so the write-restricted
	// token may write nowhere, even where the sandbox user could.
	target := os.Getenv("PUBLIC") + `\agentbox-escape.txt`
	defer os.Remove(target)
	if code, out := runReal(t, exe, false, "write:"+target); code == 0 {
		t.Fatalf("write outside the writable roots succeeded: %s", out)
	}
}

// TestLogonLaunchCallSequence runs the CreateProcessWithLogonW path with
// an account that does not exist. Under Wine the call is a stub that
// fails; on Windows the logon fails (1326). Either way Start must report
// it as a sandbox failure, not hang or succeed.
func TestLogonLaunchCallSequence(t *testing.T) {
	exe, _ := os.Executable()
	login := &setup.Login{User: "AgentboxNoSuchUser", Password: "x", Runner: exe}
	h, _, err := logonLaunch(login, RunnerArgs(`\\.\pipe\agentbox-none`, 1), "", "")
	if err == nil {
		windows.TerminateProcess(h, 1)
		windows.CloseHandle(h)
		t.Fatal("CreateProcessWithLogonW succeeded for an account that does not exist")
	}
	if !strings.Contains(err.Error(), "CreateProcessWithLogonW") {
		t.Fatalf("error does not name the call: %v", err)
	}
	t.Logf("as expected: %v", err)
}
