package resident

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const childEnv = "AGENTBOX_RESIDENT_PEER_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(peerChild(mode, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// allowAll is a seccomp program that allows everything: one filter more,
// and no restriction at all.
func allowAll() *unix.SockFprog {
	prog, err := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}})
	if err != nil {
		panic(err)
	}
	return &unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
}

// peerChild connects to sock after making itself what mode says, and
// waits for the parent to hang up.
func peerChild(mode, sock string) int {
	runtime.LockOSThread()
	switch mode {
	case "plain":
	case "nnp":
		unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	case "filter", "thread":
		unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
		flags := uintptr(unix.SECCOMP_FILTER_FLAG_TSYNC)
		if mode == "thread" {
			// This thread only: the leader looks unconfined.
			flags = 0
		}
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(allowAll()))); e != 0 {
			fmt.Fprintln(os.Stderr, "seccomp:", e)
			return 2
		}
	default:
		return 2
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 3
	}
	buf := make([]byte, 1)
	unix.Read(fd, buf)
	return 0
}

// TestCheckPeer: the peer check alone, with no sandbox and no mediation,
// accepts an unconfined process of ours and refuses one that carries a
// single extra seccomp filter (on every thread, or only on the thread
// that connects), or only no_new_privs.
func TestCheckPeer(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sock")
	ln, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 8); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode   string
		accept bool
		why    string
	}{
		{"plain", true, ""},
		{"filter", false, "filters"},
		{"thread", false, "filters"},
		{"nnp", false, "NoNewPrivs"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			cmd := exec.Command(self, "-test.run=^$", sock)
			cmd.Env = append(os.Environ(), childEnv+"="+c.mode)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			fd := acceptWithin(t, ln, 10*time.Second)
			defer unix.Close(fd)
			pid, err := checkPeer(fd, true)
			switch {
			case c.accept && err != nil:
				t.Errorf("an unconfined process of ours was refused: %v", err)
			case c.accept && pid != cmd.Process.Pid:
				t.Errorf("peer pid %d, want %d", pid, cmd.Process.Pid)
			case !c.accept && err == nil:
				t.Errorf("a process in mode %q was accepted", c.mode)
			case !c.accept && !strings.Contains(err.Error(), c.why):
				t.Errorf("refused for the wrong reason: %v (want one naming %s)", err, c.why)
			}
			if !c.accept && c.mode != "thread" {
				// The CLI's leader-only check refuses it too.
				if _, err := checkPeer(fd, false); err == nil {
					t.Errorf("leader-only check accepted mode %q", c.mode)
				}
			}
		})
	}
}

func acceptWithin(t *testing.T, ln int, d time.Duration) int {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(ln), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, int(d/time.Millisecond)); err != nil || n == 0 {
		t.Fatalf("no connection within %v: %v", d, err)
	}
	fd, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestCheckPeerGone: a peer that died before the check is refused, not
// mistaken for whatever has its pid now.
func TestCheckPeerGone(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	// A socketpair's peer credentials are its creator's, us: check the
	// accepted case first, then a connection from a child that exits.
	if _, err := checkPeer(fds[0], true); err != nil {
		t.Fatalf("our own socketpair refused: %v", err)
	}
	unix.Close(fds[1])
	dir := t.TempDir()
	sock := filepath.Join(dir, "sock")
	ln, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	unix.Listen(ln, 8)
	cmd := exec.Command("python3", "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])", sock)
	if err := cmd.Run(); err != nil {
		t.Skipf("python3 is needed for a peer that exits: %v", err)
	}
	fd := acceptWithin(t, ln, 10*time.Second)
	defer unix.Close(fd)
	if _, err := checkPeer(fd, true); err == nil {
		t.Error("a peer that has exited was accepted")
	}
}
