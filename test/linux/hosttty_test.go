//go:build linux

package linux

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ttyThief opens the terminal named by argv[1] the ways a command could,
// reads what was typed there, writes to its screen and turns its echo off.
const ttyThief = `
import os, sys, termios
p = sys.argv[1]
for mode, name in ((os.O_RDONLY, "read"), (os.O_WRONLY, "write"), (os.O_RDWR, "rdwr")):
    try:
        fd = os.open(p, mode | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as e:
        print(name, "refused", e.errno)
        continue
    print(name, "opened")
    if mode != os.O_WRONLY:
        try:
            print("stole", os.read(fd, 100))
        except OSError as e:
            print("read", e.errno)
    if mode != os.O_RDONLY:
        os.write(fd, b"INJECTED\n")
        a = termios.tcgetattr(fd)
        a[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, a)
`

// hostPty opens a pseudo-terminal on the host, its slave owned by u as a
// login terminal of u's would be, and returns the master and the slave.
func hostPty(t *testing.T, u *testUser) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := os.Chown(name, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o620); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestDegradedHostTerminals: without a mount namespace the host's /dev is
// the command's, with the user's other terminals in /dev/pts. The command
// must not read what is typed on them (a password), write to them or
// change their settings; its own terminal and /dev/null keep working.
func TestDegradedHostTerminals(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		m, s := hostPty(t, u)
		echoOn := func() bool {
			a, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			return a.Lflag&unix.ECHO != 0
		}
		// Control: the thief works on the host.
		if _, err := m.Write([]byte("typed-on-host\n")); err != nil {
			t.Fatal(err)
		}
		ctl := host(t, u, runOpts{}, python, "-c", ttyThief, s.Name())
		if !strings.Contains(ctl.stdout, "stole b'typed-on-host") || echoOn() {
			t.Fatalf("control: the thief cannot use the terminal on the host: %v", ctl)
		}
		a, _ := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
		a.Lflag |= unix.ECHO
		unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, a)
		drain(m)

		if _, err := m.Write([]byte("secret-password\n")); err != nil {
			t.Fatal(err)
		}
		r := degraded(t, fx, []string{"--allow-degraded"}, python+" -c '"+ttyThief+"' "+s.Name()+"; echo x >/dev/null && echo done")
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("degraded run failed: %v", r)
		}
		if strings.Contains(r.stdout, "opened") || strings.Contains(r.stdout, "stole") {
			t.Errorf("the degraded command opened the user's terminal %s: %v", s.Name(), r)
		}
		if !echoOn() {
			t.Errorf("host: the degraded command turned off the echo of %s", s.Name())
		}
		if got := drain(m); strings.Contains(got, "INJECTED") {
			t.Errorf("host: the degraded command wrote to %s: %q", s.Name(), got)
		}
		// What the user typed is still there for the program reading it.
		if got := drain(s); !strings.Contains(got, "secret-password") {
			t.Errorf("host: the input typed on %s was consumed: %q", s.Name(), got)
		}
	})
}

// drain reads what is waiting on a pty master (or slave) without
// blocking: raw non-blocking reads, since a pty opened by os.OpenFile may
// not be in Go's poller, where deadlines would be ignored.
func drain(f *os.File) string {
	fd := int(f.Fd())
	unix.SetNonblock(fd, true)
	var out []byte
	b := make([]byte, 4096)
	for range 1000 {
		n, err := unix.Read(fd, b)
		if err == unix.EAGAIN && len(out) == 0 {
			time.Sleep(10 * time.Millisecond) // output may still be on its way through the line discipline
			n, err = unix.Read(fd, b)
		}
		if err != nil || n <= 0 {
			break
		}
		out = append(out, b[:n]...)
	}
	return string(out)
}
