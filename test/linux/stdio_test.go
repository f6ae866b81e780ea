//go:build linux

package linux

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The attack on a host file handed over as stdio: its metadata through
// /proc/self/fd, which Landlock and read-only mounts do not cover.
const stdioMetaAttack = `
echo data
cat >/dev/null
for fd in 0 1 2; do
  chmod 4777 /proc/self/fd/$fd && echo "chmod $fd ok" >&2
  touch -d 2000-01-01T00:00:00 /proc/self/fd/$fd && echo "touch $fd ok" >&2
  $PY -c 'import os, sys
try:
    os.setxattr("/proc/self/fd/" + sys.argv[1], "user.pwned", b"1")
    print("setxattr", sys.argv[1], "ok", file=sys.stderr)
except OSError:
    pass' $fd
done
exit 3
`

// hostFileState is what the attack tries to change.
type hostFileState struct {
	mode   os.FileMode
	mtime  time.Time
	xattrs []string
}

func stateOf(t *testing.T, p string) hostFileState {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return hostFileState{mode: fi.Mode(), mtime: fi.ModTime(), xattrs: listXattrs(p)}
}

func listXattrs(p string) []string {
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(p, buf)
	if err != nil || n <= 0 {
		return nil
	}
	var out []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestStdioHostFileMetadata: `agentbox run -- … < /outside/in >> /outside/log
// 2>> /outside/err`, files outside every writable root: the command's
// chmod, touch and setxattr through /proc/self/fd leave all three as they
// were, while the output still arrives appended and the exit status is
// the command's.
func TestStdioHostFileMetadata(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		past := time.Date(2010, 1, 2, 3, 4, 5, 0, time.UTC)
		mk := func(name, content string) string {
			p := filepath.Join(fx.out, name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chown(p, u.uid, u.gid)
			os.Chtimes(p, past, past)
			return p
		}
		open := func(p string, flag int) *os.File {
			f, err := os.OpenFile(p, flag, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
		runScript := func(name string, args ...string) (in, log, errf string, code int) {
			tag := filepath.Base(name)
			in, log, errf = mk("in-"+tag, "input\n"), mk("log-"+tag, "before\n"), mk("err-"+tag, "")
			cmd := command(u, runOpts{env: append(fx.env(), "PY="+python), dir: fx.ws}, name, args...)
			cmd.Stdin = open(in, os.O_RDONLY)
			cmd.Stdout = open(log, os.O_WRONLY|os.O_APPEND)
			cmd.Stderr = open(errf, os.O_WRONLY|os.O_APPEND)
			err := cmd.Run()
			return in, log, errf, exitCode(cmd, err)
		}

		// Control: run directly on the host, the script changes all three.
		cin, clog, cerr, ccode := runScript("/bin/sh", "-c", stdioMetaAttack)
		errOut, _ := os.ReadFile(cerr)
		for _, p := range []string{cin, clog, cerr} {
			st := stateOf(t, p)
			// Writes after the chmod may clear the setuid bit, and after the
			// touch, the times; the input is never written.
			if ccode != 3 || st.mode.Perm() != 0o777 || p == cin && st.mtime.Year() != 2000 {
				t.Fatalf("control: the attack does not work on the host for %s (exit %d, %v, stderr %q)", p, ccode, st, errOut)
			}
			if !slices.Contains(st.xattrs, "user.pwned") {
				t.Logf("control: no user xattr on %s; only mode and times are checked", p)
			}
		}

		start := time.Now()
		in, log, errf, code := runScript(binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", stdioMetaAttack)
		errOut, _ = os.ReadFile(errf)
		if code != 3 {
			t.Errorf("exit %d, want the command's 3; stderr %q", code, errOut)
		}
		assertContent(t, log, "before\ndata\n")
		for _, p := range []string{in, log, errf} {
			st := stateOf(t, p)
			if st.mode != 0o644 {
				t.Errorf("host: %s has mode %v after the run, want -rw-r--r-- (stderr %q)", p, st.mode, errOut)
			}
			if st.mtime.Year() == 2000 {
				t.Errorf("host: %s was touched to %v through /proc/self/fd", p, st.mtime)
			}
			if p == in && !st.mtime.Equal(past) {
				t.Errorf("host: %s mtime %v, want it untouched (%v)", p, st.mtime, past)
			}
			if p == log && st.mtime.Before(start.Add(-time.Second)) {
				t.Errorf("host: %s mtime %v: the appended data should have updated it", p, st.mtime)
			}
			if slices.Contains(st.xattrs, "user.pwned") {
				t.Errorf("host: %s got the xattr user.pwned", p)
			}
		}
		if strings.Contains(string(errOut), " ok") {
			t.Logf("inside, some calls succeeded on the sandbox's own pipes: %q", errOut)
		}
	})
}

// TestStdioTerminal: with a real terminal (a pty the test owns, chowned to
// the user as a login terminal is) on stdin, stdout and stderr, the
// command cannot change the terminal's mode, and still has a terminal:
// isatty, its size, a resize with SIGWINCH, raw mode, and ^C as SIGINT.
// The caller's terminal settings are the same afterwards.
func TestStdioTerminal(t *testing.T) {
	needPython(t)
	const script = `
import os, signal, sys, termios, time, tty
print("isatty", os.isatty(0), os.isatty(1), os.isatty(2), flush=True)
print("size", os.get_terminal_size(0).lines, os.get_terminal_size(0).columns, flush=True)
for fd in (0, 1, 2):
    try:
        os.chmod("/proc/self/fd/%d" % fd, 0o666)
        print("chmod", fd, "ok", flush=True)
    except OSError as e:
        print("chmod", fd, "denied", e.errno, flush=True)
try:
    print("ttyname", os.ttyname(0), flush=True)
except OSError as e:
    print("ttyname failed", e, flush=True)
got = []
signal.signal(signal.SIGWINCH, lambda *a: got.append(1))
print("ready", flush=True)
deadline = time.time() + 10
while not got and time.time() < deadline:
    time.sleep(0.02)
print("winch", len(got) > 0, os.get_terminal_size(0).lines, os.get_terminal_size(0).columns, flush=True)
saved = termios.tcgetattr(0)
tty.setraw(0)
c = os.read(0, 1)
termios.tcsetattr(0, termios.TCSANOW, saved)
print("read", c, flush=True)
signal.signal(signal.SIGINT, lambda *a: (print("sigint", flush=True), os._exit(7)))
print("wait-int", flush=True)
time.sleep(10)
print("no sigint", flush=True)
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		master, slave, err := openPty()
		if err != nil {
			t.Skipf("cannot allocate a pty: %v", err)
		}
		defer master.Close()
		defer slave.Close()
		sfd := int(slave.Fd())
		// A terminal as a user's shell has it: cooked, echo, signals.
		tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		tio.Lflag |= unix.ICANON | unix.ECHO | unix.ISIG
		tio.Cc[unix.VMIN] = 1
		if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
			t.Fatal(err)
		}
		before, _ := unix.IoctlGetTermios(sfd, unix.TCGETS)
		if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 37, Col: 101}); err != nil {
			t.Fatal(err)
		}
		if u.cred != nil {
			if err := slave.Chown(u.uid, u.gid); err != nil {
				t.Fatal(err)
			}
		}
		if err := slave.Chmod(0o620); err != nil {
			t.Fatal(err)
		}
		fi, _ := slave.Stat()
		modeBefore := fi.Mode()

		cmd := command(u, runOpts{dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", python, "-c", script)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
		var mu sync.Mutex
		var out bytes.Buffer
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := master.Read(buf)
				mu.Lock()
				out.Write(buf[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		output := func() string {
			mu.Lock()
			defer mu.Unlock()
			return out.String()
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		step := func(marker string) bool {
			if !waitFor(15*time.Second, func() bool { return strings.Contains(output(), marker) }) {
				t.Errorf("no %q from the command; output so far %q", marker, output())
				return false
			}
			return true
		}
		if step("ready") {
			unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 120})
		}
		if step("winch") {
			time.Sleep(100 * time.Millisecond) // let it enter raw mode
			master.Write([]byte("x"))
		}
		if step("wait-int") {
			master.Write([]byte{3}) // ^C
		}
		var werr error
		select {
		case werr = <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			werr = <-done
			t.Errorf("agentbox did not finish")
		}
		time.Sleep(100 * time.Millisecond)
		o := strings.ReplaceAll(output(), "\r\n", "\n")
		t.Logf("terminal output:\n%s", o)
		if code := exitCode(cmd, werr); code != 7 {
			t.Errorf("exit %d, want 7 (the command's, after SIGINT from ^C)", code)
		}
		for _, want := range []string{
			"isatty True True True\n",
			"size 37 101\n",
			"ttyname /dev/pts/",
			"winch True 50 120\n",
			"read b'x'\n",
			"sigint\n",
		} {
			if !strings.Contains(o, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		fi, _ = slave.Stat()
		if fi.Mode() != modeBefore {
			t.Errorf("host: the terminal's mode changed from %v to %v", modeBefore, fi.Mode())
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != u.uid && u.cred != nil {
			t.Errorf("host: the terminal's owner changed to %d", st.Uid)
		}
		after, _ := unix.IoctlGetTermios(sfd, unix.TCGETS)
		if before != nil && after != nil && *before != *after {
			t.Errorf("host: terminal settings not restored:\nbefore %+v\nafter  %+v", *before, *after)
		}
	})
}

// TestStdioRelayOrder: `agentbox run -- … >> log 2>&1` with the log outside
// the roots keeps stdout and stderr in the order the command wrote them,
// and everything arrives (a burst larger than any pipe buffer included).
func TestStdioRelayOrder(t *testing.T) {
	const script = `i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done; head -c 3000000 /dev/zero | tr '\0' x; echo; exit 4`
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		log := filepath.Join(fx.out, "log")
		if err := os.WriteFile(log, []byte("before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(log, u.uid, u.gid)
		f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := command(u, runOpts{dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Run()
		if code := exitCode(cmd, err); code != 4 {
			t.Errorf("exit %d, want 4", code)
		}
		var want strings.Builder
		want.WriteString("before\n")
		for i := range 200 {
			fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
		}
		want.WriteString(strings.Repeat("x", 3000000) + "\n")
		b, _ := os.ReadFile(log)
		if string(b) != want.String() {
			n := min(len(b), 300)
			t.Errorf("log has %d bytes, want %d; starts %q", len(b), want.Len(), b[:n])
		}
	})
}

// TestStdioReopenedFiles: a regular file as stdin is reopened inside the
// sandbox, read-only, at the caller's offset, so it stays seekable while
// its metadata stays out of reach; an appended stdout inside the
// workspace is the file itself (no relay), and one outside is relayed.
func TestStdioReopenedFiles(t *testing.T) {
	needPython(t)
	const script = `
import os, sys
print("size", os.lseek(0, 0, os.SEEK_END), "link", os.readlink("/proc/self/fd/1"))
try:
    os.chmod("/proc/self/fd/0", 0o600)
    print("chmod ok")
except OSError as e:
    print("chmod", e.errno)
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		in := filepath.Join(fx.out, "in")
		inner := filepath.Join(fx.ws, "out.log")
		outer := filepath.Join(fx.out, "out.log")
		for _, p := range []string{in, inner, outer} {
			if err := os.WriteFile(p, []byte("0123456789\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chown(p, u.uid, u.gid)
		}
		for _, out := range []string{inner, outer} {
			fin, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			fin.Seek(4, 0)
			fout, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			cmd := command(u, runOpts{dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", python, "-c", script)
			var stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = fin, fout, &stderr
			err = cmd.Run()
			fin.Close()
			fout.Close()
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			b, _ := os.ReadFile(out)
			link := "pipe:["
			if out == inner {
				link = inner
			}
			if !strings.HasPrefix(string(b), "0123456789\nsize 11 link "+link) || !strings.HasSuffix(string(b), "chmod 30\n") {
				t.Errorf("%s: got %q, want the input seekable (size 11), stdout %s and chmod refused with EROFS (30)", out, b, link)
			}
			if fi, _ := os.Stat(in); fi.Mode() != 0o644 {
				t.Errorf("host: %s mode %v", in, fi.Mode())
			}
		}
	})
}

// TestStdioTerminalBackground: `agentbox run -- … &` from an interactive
// shell whose terminal is stdin: agentbox neither takes the terminal's
// input nor switches its mode, so it is not stopped by SIGTTOU or SIGTTIN,
// and it finishes.
func TestStdioTerminalBackground(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no bash")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		master, slave, err := openPty()
		if err != nil {
			t.Skipf("cannot allocate a pty: %v", err)
		}
		defer master.Close()
		defer slave.Close()
		if u.cred != nil {
			slave.Chown(u.uid, u.gid)
		}
		script := binPath + ` run -C ` + fx.ws + ` -- sh -c 'sleep 0.3; echo bg-done' & sleep 3; jobs; echo shell-done`
		cmd := command(u, runOpts{dir: fx.ws}, "/bin/bash", "--norc", "--noprofile", "-i", "-c", script)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
		var mu sync.Mutex
		var out bytes.Buffer
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := master.Read(buf)
				mu.Lock()
				out.Write(buf[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("bash did not finish")
		}
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		o := out.String()
		mu.Unlock()
		if !strings.Contains(o, "bg-done") || !strings.Contains(o, "shell-done") || strings.Contains(o, "Stopped") {
			t.Errorf("background agentbox did not run to the end unstopped:\n%s", o)
		}
	})
}

// TestDevNodesReadOnly: the sandbox's /dev/null and friends are the host's
// device nodes, bound in; root inside owns them and could chmod or touch
// the host's nodes (and with them the /dev/null a caller hands over as
// stdio) unless the binds are read-only. The chmod asks for the mode the
// nodes already have, so the host is unchanged even when it succeeds.
func TestDevNodesReadOnly(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := sandboxed(t, fx, nil, `for d in null zero full random urandom tty; do
  chmod 0666 /dev/$d 2>/dev/null && echo "chmod $d ok"
  touch -c /dev/$d 2>/dev/null && echo "touch $d ok"
done; exec 3>/dev/null; echo written >&3 && echo write ok`)
		if r.stdout != "write ok\n" || r.code != 0 {
			t.Errorf("device nodes changed from inside, or writing /dev/null failed: %v", r)
		}
	})
}
