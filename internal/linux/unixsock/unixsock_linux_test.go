package unixsock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"golang.org/x/sys/unix"
)

// The test binary plays these parts, chosen by modeEnv:
//   - "supervise": like the init stage, it installs the main seccomp
//     filter (and Landlock when available) on all threads, then this
//     package's filter on its locked main thread, forks the "probe" part
//     from that thread and waits for it with Supervisor.Wait4;
//   - "supervise-noabstract": the same with Options.RefuseAbstract, as
//     in a run without a network namespace;
//   - "plain": forks the probe part with no mediation at all, which shows
//     that every probe can tell the difference;
//   - "probe": runs the probes and prints their results as JSON.
const (
	modeEnv  = "UNIXSOCK_TEST_MODE"
	rootEnv  = "UNIXSOCK_TEST_ROOT" // the allowed (writable) root
	inEnv    = "UNIXSOCK_TEST_IN"   // listener inside the root
	outEnv   = "UNIXSOCK_TEST_OUT"  // listener outside the root
	tcpEnv   = "UNIXSOCK_TEST_TCP"  // 127.0.0.1:port listener
	absEnv   = "UNIXSOCK_TEST_ABS"  // abstract listener's name, without the NUL
	probeArg = "unixsock-probe"
)

func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "":
		os.Exit(m.Run())
	case "probe":
		os.Exit(probeMain())
	default:
		os.Exit(superviseMain(os.Getenv(modeEnv)))
	}
}

func superviseMain(mode string) int {
	runtime.LockOSThread()
	root := os.Getenv(rootEnv)
	var sup *Supervisor
	if mode == "supervise" || mode == "supervise-noabstract" {
		if abi, err := landlock.ABI(); err == nil && abi >= landlock.DefaultMinABI {
			// On all threads, as the init stage does: before ABI 8
			// that gives every thread its own domain, which is what
			// Supervisor.Wait4 has to work around.
			if _, err := landlock.Restrict(landlock.Config{WritableRoots: []string{root}, ScopeSignals: true}); err != nil {
				fmt.Fprintln(os.Stderr, "landlock:", err)
				return 2
			}
		}
		prog, err := seccomp.BuildNativeProgram(seccomp.Options{})
		if err == nil {
			err = seccomp.Install(prog)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "seccomp:", err)
			return 2
		}
		sup, err = Start(func(p string, _ *unix.Stat_t) bool { return fspath.Within(p, root) },
			Options{RefuseAbstract: mode == "supervise-noabstract"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			return 2
		}
	}
	cmd := exec.Command("/proc/self/exe", probeArg)
	cmd.Env = append(os.Environ(), modeEnv+"=probe")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start probe:", err)
		return 2
	}
	var ws unix.WaitStatus
	var err error
	if sup != nil {
		_, err = sup.Wait4(cmd.Process.Pid, &ws, 0, nil)
	} else {
		_, err = unix.Wait4(cmd.Process.Pid, &ws, 0, nil)
	}
	if err != nil || ws.ExitStatus() != 0 {
		fmt.Fprintln(os.Stderr, "probe:", err, ws)
		return 2
	}
	return 0
}

// probeMain runs each probe and reports "ok" or the errno name.
func probeMain() int {
	in, out, tcp := os.Getenv(inEnv), os.Getenv(outEnv), os.Getenv(tcpEnv)
	root := os.Getenv(rootEnv)
	res := map[string]string{}
	do := func(name string, f func() error) {
		if err := f(); err != nil {
			var en unix.Errno
			if errors.As(err, &en) {
				res[name] = unix.ErrnoName(en)
			} else {
				res[name] = err.Error()
			}
			return
		}
		res[name] = "ok"
	}
	// dial connects a blocking unix stream socket and checks the echo,
	// so "ok" means the listener really answered.
	dial := func(path string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			return err
		}
		return echo(fd)
	}
	do("outside", func() error { return dial(out) })
	do("inside", func() error { return dial(in) })
	do("inside relative", func() error {
		if err := os.Chdir(filepath.Dir(in)); err != nil {
			return err
		}
		return dial(filepath.Base(in))
	})
	do("outside relative", func() error {
		if err := os.Chdir(filepath.Dir(out)); err != nil {
			return err
		}
		return dial("./" + filepath.Base(out))
	})
	do("symlink in root to outside", func() error {
		l := filepath.Join(root, "link.sock")
		os.Remove(l)
		if err := os.Symlink(out, l); err != nil {
			return err
		}
		return dial(l)
	})
	do("/proc/self/fd of outside", func() error {
		fd, err := unix.Open(out, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return dial(fmt.Sprintf("/proc/self/fd/%d", fd))
	})
	do("/proc/self/fd of inside", func() error {
		fd, err := unix.Open(in, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return dial(fmt.Sprintf("/proc/self/fd/%d", fd))
	})
	do("missing", func() error { return dial(filepath.Join(root, "nope.sock")) })
	do("own server in root", func() error {
		p := filepath.Join(root, "own.sock")
		os.Remove(p)
		ln, err := net.Listen("unix", p)
		if err != nil {
			return err
		}
		defer ln.Close()
		go serveEcho(ln, nil)
		c, err := net.Dial("unix", p) // Go's connect is non-blocking
		if err != nil {
			return err
		}
		defer c.Close()
		return echoConn(c)
	})
	do("abstract", func() error { return dial("@" + os.Getenv(absEnv)) })
	do("own abstract server", func() error {
		name := fmt.Sprintf("@agentbox-unixsock-own-%d", os.Getpid())
		ln, err := net.Listen("unix", name)
		if err != nil {
			return err
		}
		defer ln.Close()
		go serveEcho(ln, nil)
		return dial(name)
	})
	do("tcp loopback", func() error {
		c, err := net.DialTimeout("tcp", tcp, 5*time.Second) // non-blocking connect, EINPROGRESS
		if err != nil {
			return err
		}
		defer c.Close()
		return echoConn(c)
	})
	do("tcp loopback blocking", func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		addr, _ := net.ResolveTCPAddr("tcp", tcp)
		sa := &unix.SockaddrInet4{Port: addr.Port}
		copy(sa.Addr[:], addr.IP.To4())
		if err := unix.Connect(fd, sa); err != nil {
			return err
		}
		return echo(fd)
	})
	do("tcp closed port", func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:1", 5*time.Second)
		if c != nil {
			c.Close()
		}
		var en unix.Errno
		if errors.As(err, &en) {
			return en
		}
		return err
	})
	do("unix dgram socket", func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	do("unix dgram socketpair", func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	})
	do("unix stream socketpair", func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	})
	do("bad fd", func() error { return unix.Connect(999, &unix.SockaddrUnix{Name: in}) })
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func echo(fd int) error {
	d, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(d), "sock")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return err
	}
	defer c.Close()
	return echoConn(c)
}

func echoConn(c net.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo got %q", line)
	}
	return nil
}

func serveEcho(ln net.Listener, n *atomic.Int32) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if n != nil {
			n.Add(1)
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Write([]byte(line))
		}()
	}
}

type listeners struct {
	root, in, out, tcp, abs string
	nIn, nOut, nAbs         atomic.Int32
}

func startListeners(t *testing.T) *listeners {
	l := &listeners{root: t.TempDir()}
	outDir := t.TempDir()
	l.in = filepath.Join(l.root, "in.sock")
	l.out = filepath.Join(outDir, "out.sock")
	for _, x := range []struct {
		p string
		n *atomic.Int32
	}{{l.in, &l.nIn}, {l.out, &l.nOut}} {
		ln, err := net.Listen("unix", x.p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go serveEcho(ln, x.n)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serveEcho(ln, nil)
	l.tcp = ln.Addr().String()
	// Go spells an abstract address with a leading @.
	l.abs = fmt.Sprintf("agentbox-unixsock-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	aln, err := net.Listen("unix", "@"+l.abs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aln.Close() })
	go serveEcho(aln, &l.nAbs)
	return l
}

func runChild(t *testing.T, mode string, l *listeners) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"="+mode, rootEnv+"="+l.root, inEnv+"="+l.in, outEnv+"="+l.out, tcpEnv+"="+l.tcp, absEnv+"="+l.abs)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s child: %v\n%s", mode, err, stderr.String())
	}
	res := map[string]string{}
	if err := json.Unmarshal(outb, &res); err != nil {
		t.Fatalf("%s child output %q: %v\n%s", mode, outb, err, stderr.String())
	}
	return res
}

func TestMediation(t *testing.T) {
	want := map[string]string{
		"outside":                    "EACCES",
		"inside":                     "ok",
		"inside relative":            "ok",
		"outside relative":           "EACCES",
		"symlink in root to outside": "EACCES",
		"/proc/self/fd of outside":   "EACCES",
		"/proc/self/fd of inside":    "ok",
		"missing":                    "ENOENT",
		"own server in root":         "ok",
		"tcp loopback":               "ok",
		"tcp loopback blocking":      "ok",
		"tcp closed port":            "ECONNREFUSED",
		"unix dgram socket":          "EPERM",
		"unix dgram socketpair":      "EPERM",
		"unix stream socketpair":     "ok",
		"bad fd":                     "EBADF",
		// Here the abstract namespace is the host's; the init stage sets
		// RefuseAbstract for that case, and only then (see below).
		"abstract":            "ok",
		"own abstract server": "ok",
	}
	// Without mediation the same probes reach the outside listener and
	// create datagram sockets: each expectation can fail.
	t.Run("plain", func(t *testing.T) {
		l := startListeners(t)
		got := runChild(t, "plain", l)
		for _, k := range []string{"outside", "outside relative", "symlink in root to outside", "/proc/self/fd of outside", "unix dgram socket", "unix dgram socketpair", "abstract"} {
			if got[k] != "ok" {
				t.Errorf("unmediated %q = %s, want ok", k, got[k])
			}
		}
		if l.nOut.Load() == 0 {
			t.Error("unmediated: the outside listener saw no connection")
		}
		if l.nAbs.Load() == 0 {
			t.Error("unmediated: the abstract listener saw no connection")
		}
	})
	t.Run("supervised", func(t *testing.T) {
		l := startListeners(t)
		got := runChild(t, "supervise", l)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%q = %s, want %s", k, got[k], w)
			}
		}
		if n := l.nOut.Load(); n != 0 {
			t.Errorf("the outside listener saw %d connections", n)
		}
		if l.nIn.Load() == 0 {
			t.Error("the inside listener saw no connection")
		}
	})
	// Without a network namespace (degraded runs) the abstract
	// namespace is the host's: every abstract connect is refused, the
	// command's own included, and the rest is as above.
	t.Run("supervised without abstract", func(t *testing.T) {
		l := startListeners(t)
		got := runChild(t, "supervise-noabstract", l)
		w := maps.Clone(want)
		w["abstract"] = "EACCES"
		w["own abstract server"] = "EACCES"
		for k, w := range w {
			if got[k] != w {
				t.Errorf("%q = %s, want %s", k, got[k], w)
			}
		}
		if n := l.nAbs.Load(); n != 0 {
			t.Errorf("the host's abstract listener saw %d connections", n)
		}
		if n := l.nOut.Load(); n != 0 {
			t.Errorf("the outside listener saw %d connections", n)
		}
	})
}
