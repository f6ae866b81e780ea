package ipc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// TestMain lets the test binary act as a pipe client in another process.
func TestMain(m *testing.M) {
	if name := os.Getenv("AGENTBOX_IPC_TEST_DIAL"); name != "" {
		os.Exit(dialHelper(name))
	}
	os.Exit(m.Run())
}

func dialHelper(name string) int {
	server, _ := strconv.Atoi(os.Getenv("AGENTBOX_IPC_TEST_SERVER"))
	f, err := Dial(name, 5*time.Second, uint32(server))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer f.Close()
	fr, err := ReadFrame(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var d Data
	if err := fr.Decode(&d); err != nil {
		return 4
	}
	if err := Send(f, TypeStdout, Data{B: append([]byte("echo:"), d.B...)}); err != nil {
		return 5
	}
	if err := Send(f, TypeExit, Exit{Code: uint32(os.Getpid())}); err != nil {
		return 6
	}
	return 0
}

func selfSID(t *testing.T) string {
	t.Helper()
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	return u.User.Sid.String()
}

func listen(t *testing.T) *Listener {
	t.Helper()
	name, err := PipeName()
	if err != nil {
		t.Fatal(err)
	}
	sddl, err := PipeSDDL(selfSID(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(name, sddl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestPipeSameProcess(t *testing.T) {
	l := listen(t)
	me := uint32(os.Getpid())
	type res struct {
		f   *os.File
		err error
	}
	dialed := make(chan res, 1)
	go func() {
		f, err := Dial(l.Name(), 5*time.Second, me)
		dialed <- res{f, err}
	}()
	srv, err := l.Accept(5*time.Second, me)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := <-dialed
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.f.Close()

	if err := Send(srv, TypeSpawn, Spawn{Path: "cmd.exe", Args: []string{"cmd"}}); err != nil {
		t.Fatal(err)
	}
	fr, err := ReadFrame(r.f)
	if err != nil || fr.Type != TypeSpawn {
		t.Fatalf("client read %+v, %v", fr, err)
	}
	if err := Send(r.f, TypeExit, Exit{Code: 7}); err != nil {
		t.Fatal(err)
	}
	fr, err = ReadFrame(srv)
	var ex Exit
	if err != nil || fr.Decode(&ex) != nil || ex.Code != 7 {
		t.Fatalf("server read %+v, %v", fr, err)
	}

	// Deadlines work on the pipe: a read with nothing to read times out
	// instead of hanging.
	srv.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := ReadFrame(srv); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
	// Closing the client gives the server a clean EOF.
	srv.SetReadDeadline(time.Time{})
	r.f.Close()
	if _, err := ReadFrame(srv); err == nil {
		t.Fatal("read after client close succeeded")
	}
}

func TestPipeOtherProcess(t *testing.T) {
	l := listen(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "AGENTBOX_IPC_TEST_DIAL="+l.Name(), "AGENTBOX_IPC_TEST_SERVER="+strconv.Itoa(os.Getpid()))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv, err := l.Accept(10*time.Second, uint32(cmd.Process.Pid))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	defer srv.Close()
	if err := Send(srv, TypeStdin, Data{B: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	fr, err := ReadFrame(srv)
	var d Data
	if err != nil || fr.Decode(&d) != nil || string(d.B) != "echo:hi" {
		t.Fatalf("got %+v %q, %v", fr, d.B, err)
	}
	fr, err = ReadFrame(srv)
	var ex Exit
	if err != nil || fr.Decode(&ex) != nil || int(ex.Code) != cmd.Process.Pid {
		t.Fatalf("exit frame %+v, %v (child pid %d)", fr, err, cmd.Process.Pid)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client process: %v", err)
	}
}

func TestAcceptTimeout(t *testing.T) {
	l := listen(t)
	start := time.Now()
	_, err := l.Accept(200*time.Millisecond, 1)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Accept with no client: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Accept took %v", d)
	}
}

func TestAcceptRefusesOtherPID(t *testing.T) {
	l := listen(t)
	me := uint32(os.Getpid())
	go func() {
		if f, err := Dial(l.Name(), 5*time.Second, 0); err == nil {
			defer f.Close()
			ReadFrame(f) // until the server hangs up
		}
	}()
	_, err := l.Accept(5*time.Second, me+1)
	if err == nil || !strings.Contains(err.Error(), "not the runner") {
		t.Fatalf("Accept from the wrong process: %v", err)
	}
}

func TestDialRefusesOtherServer(t *testing.T) {
	l := listen(t)
	go l.Accept(5*time.Second, uint32(os.Getpid()))
	_, err := Dial(l.Name(), 5*time.Second, uint32(os.Getpid())+1)
	if err == nil || !strings.Contains(err.Error(), "not agentbox") {
		t.Fatalf("Dial to the wrong server: %v", err)
	}
}

func TestDialTimeout(t *testing.T) {
	name, _ := PipeName()
	_, err := Dial(name, 100*time.Millisecond, 0)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Dial to no pipe: %v", err)
	}
}

func TestListenRefusesSquattedName(t *testing.T) {
	l := listen(t)
	sddl, _ := PipeSDDL(selfSID(t))
	if l2, err := Listen(l.Name(), sddl); err == nil {
		l2.Close()
		t.Fatal("second Listen on the same name succeeded (FILE_FLAG_FIRST_PIPE_INSTANCE)")
	}
}
