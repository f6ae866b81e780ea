//go:build linux

package linux

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExitCodes checks the exit-status contract of DESIGN.md.
func TestExitCodes(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		noexec := filepath.Join(fx.ws, "noexec.sh")
		os.WriteFile(noexec, []byte("#!/bin/sh\necho ran\n"), 0o644)
		os.Chown(noexec, u.uid, u.gid)
		badCfg := filepath.Join(fx.dir, "bad.toml")
		os.WriteFile(badCfg, []byte("sandbox_mode = \"workspace-write\"\nbogus_key_xyz = true\n"), 0o644)
		badCfg2 := filepath.Join(fx.dir, "bad2.toml")
		os.WriteFile(badCfg2, []byte("[sandbox_workspace_write]\nwritable_rootz = [\"/\"]\n"), 0o644)
		missing := filepath.Join(fx.dir, "does-not-exist", "ws")
		cases := []struct {
			name     string
			args     []string
			want     int
			stderrIn []string
		}{
			{"exit3", []string{"run", "-C", fx.ws, "--", "/bin/sh", "-c", "exit 3"}, 3, nil},
			{"exit0", []string{"run", "-C", fx.ws, "--", "true"}, 0, nil},
			{"false", []string{"run", "-C", fx.ws, "--", "false"}, 1, nil},
			{"sigterm", []string{"run", "-C", fx.ws, "--", "/bin/sh", "-c", "kill -TERM $$"}, 143, nil},
			{"sigkill", []string{"run", "-C", fx.ws, "--", "/bin/sh", "-c", "kill -KILL $$"}, 137, nil},
			{"not-found", []string{"run", "-C", fx.ws, "--", "agentbox-no-such-command"}, 127, nil},
			{"not-found-path", []string{"run", "-C", fx.ws, "--", "/nonexistent/agentbox-cmd"}, 127, nil},
			{"not-executable", []string{"run", "-C", fx.ws, "--", noexec}, 126, nil},
			{"directory", []string{"run", "-C", fx.ws, "--", fx.ws}, 126, nil},
			{"bad-mode", []string{"run", "-s", "bogus-mode", "-C", fx.ws, "--", "true"}, 125, []string{"bogus-mode"}},
			{"missing-C", []string{"run", "-C", missing, "--", "true"}, 125, []string{missing}},
			{"missing-add-dir", []string{"run", "-C", fx.ws, "--add-dir", missing, "--", "true"}, 125, []string{missing}},
			{"config-unknown-key", []string{"run", "--config", badCfg, "-C", fx.ws, "--", "true"}, 125, []string{"bogus_key_xyz", badCfg}},
			{"config-unknown-nested-key", []string{"run", "--config", badCfg2, "-C", fx.ws, "--", "true"}, 125, []string{"writable_rootz", badCfg2}},
			{"bad-timeout", []string{"run", "--timeout", "soon", "-C", fx.ws, "--", "true"}, 125, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := runWith(t, u, runOpts{dir: fx.ws}, c.args...)
				if r.code != c.want {
					t.Errorf("exit %d, want %d: %v", r.code, c.want, r)
				}
				for _, s := range c.stderrIn {
					if !strings.Contains(r.stderr, s) {
						t.Errorf("stderr does not name %q: %q", s, r.stderr)
					}
				}
				if strings.Contains(r.stdout, "ran") {
					t.Errorf("non-executable file was run: %v", r)
				}
			})
		}
		assertAbsent(t, filepath.Join(fx.dir, "does-not-exist"))
	})
}

// TestStdin: stdin passes straight through, byte for byte.
func TestStdin(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := runWith(t, u, runOpts{dir: fx.ws, stdin: strings.NewReader("hello stdin\n")}, "run", "-C", fx.ws, "--", "cat")
		if r.code != 0 || r.stdout != "hello stdin\n" {
			t.Errorf("cat: %v", r)
		}
		big := make([]byte, 4<<20)
		rand.Read(big)
		r = runWith(t, u, runOpts{dir: fx.ws, stdin: bytes.NewReader(big)}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `cat > big.bin && sha256sum < big.bin`)
		want := fmt.Sprintf("%x", sha256.Sum256(big))
		if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
			t.Errorf("4 MiB through stdin: want sha %s: %v", want, r)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.ws, "big.bin")); !bytes.Equal(b, big) {
			t.Errorf("host: big.bin differs from what was sent (%d bytes)", len(b))
		}
	})
}

// TestCwdAndEnv: the command sees the workspace as its cwd and the caller's
// environment, including custom variables.
func TestCwdAndEnv(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		sub := filepath.Join(fx.ws, "sub")
		val := "a value with spaces, $dollar and 'quotes'"
		for _, c := range []struct {
			name, dir string
			args      []string
			wantCwd   string
		}{
			{"-C", fx.dir, []string{"run", "-C", fx.ws}, fx.ws},
			{"-C-sub", fx.dir, []string{"run", "-C", sub}, sub},
			{"cwd", sub, []string{"run"}, sub},
		} {
			t.Run(c.name, func(t *testing.T) {
				args := append(c.args, "--", "/bin/sh", "-c", `pwd; printf '%s\n' "$AGENTBOX_TEST_VAR"; printf '%s\n' "$HOME"; echo x > here.txt`)
				r := runWith(t, u, runOpts{dir: c.dir, env: []string{"AGENTBOX_TEST_VAR=" + val}}, args...)
				lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
				if r.code != 0 || len(lines) != 3 {
					t.Fatalf("run: %v", r)
				}
				if lines[0] != c.wantCwd {
					t.Errorf("cwd %q, want %q", lines[0], c.wantCwd)
				}
				if lines[1] != val {
					t.Errorf("AGENTBOX_TEST_VAR = %q, want %q", lines[1], val)
				}
				if lines[2] != u.home {
					t.Errorf("HOME = %q, want %q", lines[2], u.home)
				}
				assertContent(t, filepath.Join(c.wantCwd, "here.txt"), "x\n")
				os.Remove(filepath.Join(c.wantCwd, "here.txt"))
			})
		}
	})
}

// TestBackgroundChildren: nothing the command starts outlives the run.
func TestBackgroundChildren(t *testing.T) {
	cases := []struct{ name, script string }{
		{"ampersand", `sleep $TOK & echo started`},
		{"ampersand-holding-stdout", `sleep $TOK & echo started`},
		{"setsid", `setsid sleep $TOK >/dev/null 2>&1 < /dev/null & echo started`},
		{"setsid-fork", `setsid -f sleep $TOK >/dev/null 2>&1 < /dev/null; echo started`},
		{"nohup", `nohup sleep $TOK >/dev/null 2>&1 & echo started`},
		{"double-fork", `(sh -c 'sleep $TOK >/dev/null 2>&1 &' &); echo started`},
		{"heartbeat", `(trap '' HUP TERM INT; while :; do date +%s%N > "$WS/heartbeat"; sleep 0.05; done) >/dev/null 2>&1 & sleep 0.3; setsid sleep $TOK >/dev/null 2>&1 & echo started`},
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t, u)
				tok := sleepToken()
				r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "TOK="+tok), timeout: 15 * time.Second},
					"run", "-C", fx.ws, "--", "/bin/sh", "-c", c.script)
				left := procsWith(tok)
				if r.code != 0 || !strings.Contains(r.stdout, "started") {
					t.Errorf("run: %v", r)
				}
				if r.dur > 5*time.Second {
					t.Errorf("agentbox took %v to return (waited for the background child?)", r.dur)
				}
				if len(left) > 0 {
					time.Sleep(time.Second)
					t.Errorf("host: background process still running right after agentbox returned: %v (1s later: %v)", left, procsWith(tok))
					killPids(left)
				}
				if c.name == "heartbeat" {
					hb := filepath.Join(fx.ws, "heartbeat")
					b1, err := os.ReadFile(hb)
					if err != nil {
						t.Fatalf("heartbeat never written: %v", err)
					}
					time.Sleep(400 * time.Millisecond)
					if b2, _ := os.ReadFile(hb); !bytes.Equal(b1, b2) {
						t.Errorf("host: heartbeat still updated after agentbox returned: %q -> %q", b1, b2)
					}
				}
			})
		}
	})
}

func killPids(entries []string) {
	for _, e := range entries {
		var pid int
		fmt.Sscanf(e, "%d:", &pid)
		if pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestTimeout: --timeout ends the whole tree promptly with a failure status.
func TestTimeout(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tok := sleepToken()
		r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"TOK=" + tok}, timeout: 15 * time.Second},
			"run", "--timeout", "1s", "-C", fx.ws, "--", "/bin/sh", "-c", `setsid sleep $TOK & sleep $TOK`)
		if r.code == 0 {
			t.Errorf("timed-out command exited 0: %v", r)
		}
		if r.code == 125 {
			t.Errorf("timeout reported as agentbox failure (125): %v", r)
		}
		if r.dur > 4*time.Second {
			t.Errorf("--timeout 1s returned after %v", r.dur)
		}
		if left := procsWith(tok); len(left) > 0 {
			t.Errorf("host: processes survived the timeout: %v", left)
			killPids(left)
		}
		t.Logf("timeout: %v", r)
	})
}

// TestSignals: SIGINT and SIGTERM sent to agentbox reach the command, whose
// trap handler runs and whose own exit status is returned.
func TestSignals(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range []struct {
			sig  syscall.Signal
			name string
			code int
		}{{syscall.SIGTERM, "TERM", 7}, {syscall.SIGINT, "INT", 8}, {syscall.SIGHUP, "HUP", 9}} {
			t.Run(c.name, func(t *testing.T) {
				needBin(t)
				fx := newFixture(t, u)
				script := fmt.Sprintf(`trap 'echo got-%s > "$WS/marker"; exit %d' %s
echo ready > "$WS/ready"
while :; do sleep 0.05; done`, c.name, c.code, c.name)
				cmd := command(u, runOpts{dir: fx.ws, env: fx.env()}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer cmd.Process.Kill()
				if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) }) {
					t.Fatalf("command never became ready; stderr %q", stderr.String())
				}
				cmd.Process.Signal(c.sig)
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					if got := exitCode(cmd, err); got != c.code {
						t.Errorf("exit %d, want the command's own %d; stderr %q", got, c.code, stderr.String())
					}
				case <-time.After(5 * time.Second):
					cmd.Process.Kill()
					t.Fatalf("agentbox did not exit within 5s of SIG%s (marker written: %v)", c.name, exists(filepath.Join(fx.ws, "marker")))
				}
				assertContent(t, filepath.Join(fx.ws, "marker"), "got-"+c.name+"\n")
			})
		}
	})
}

// TestAgentboxKilled: when agentbox itself is SIGKILLed the tree dies too.
func TestAgentboxKilled(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		tok := sleepToken()
		cmd := command(u, runOpts{dir: fx.ws, env: append(fx.env(), "TOK="+tok)}, binPath, "run", "-C", fx.ws, "--",
			"/bin/sh", "-c", `setsid sleep $TOK & echo ready > "$WS/ready"; sleep $TOK`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) }) {
			cmd.Process.Kill()
			t.Fatal("command never became ready")
		}
		if !waitFor(5*time.Second, func() bool { return len(procsWith(tok)) == 2 }) {
			t.Errorf("control: sleepers not visible on the host before the kill: %v", procsWith(tok))
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !waitFor(2*time.Second, func() bool { return len(procsWith(tok)) == 0 }) {
			left := procsWith(tok)
			t.Errorf("host: processes survived SIGKILL of agentbox: %v", left)
			killPids(left)
		}
	})
}

// TestPrivileges: no_new_privs is set, capabilities are gone, and setuid
// binaries cannot raise privileges.
func TestPrivileges(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb):' /proc/self/status`)
		for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapAmb:\t0000000000000000"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("want %q in /proc/self/status: %v", want, r)
			}
		}
		if u.root() {
			return
		}
		// Setuid-root copies of id and touch, outside the workspace, and a
		// root-owned directory inside it that only root may write.
		suidID := filepath.Join(fx.out, "suid-id")
		suidTouch := filepath.Join(fx.out, "suid-touch")
		for src, dst := range map[string]string{"/usr/bin/id": suidID, "/usr/bin/touch": suidTouch} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Skipf("no %s: %v", src, err)
			}
			os.WriteFile(dst, b, 0o755)
			os.Chown(dst, 0, 0)
			syscall.Chmod(dst, 0o4755) // os.Chmod would drop the raw 04000 bit
		}
		rootOnly := filepath.Join(fx.ws, "rootonly")
		os.Mkdir(rootOnly, 0o755)
		os.Chown(rootOnly, 0, 0)
		if ctl := host(t, u, runOpts{}, suidID, "-u"); strings.TrimSpace(ctl.stdout) != "0" {
			t.Skipf("control: setuid bit does not work on the host here (%v)", ctl)
		}
		inner := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", "id", "-u")
		r = runWith(t, u, runOpts{dir: fx.ws, env: []string{"SUID_ID=" + suidID, "SUID_TOUCH=" + suidTouch, "RO=" + rootOnly}},
			"run", "-C", fx.ws, "--", "/bin/sh", "-c", `"$SUID_ID" -u; "$SUID_TOUCH" "$RO/pwned"; su -c "touch $RO/pwned-su" root </dev/null; echo end`)
		lines := strings.Split(r.stdout, "\n")
		if lines[0] != strings.TrimSpace(inner.stdout) {
			t.Errorf("setuid id gave euid %q, plain id %q: %v", lines[0], inner.stdout, r)
		}
		assertAbsent(t, filepath.Join(rootOnly, "pwned"))
		assertAbsent(t, filepath.Join(rootOnly, "pwned-su"))
	})
}

// TestTIOCSTI: with a real terminal as stdin (agentbox's controlling tty),
// the command cannot push input into it, and the terminal stays a terminal.
func TestTIOCSTI(t *testing.T) {
	needPython(t)
	if b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); err == nil && strings.TrimSpace(string(b)) == "0" {
		t.Log("kernel has legacy_tiocsti=0: TIOCSTI is off for everyone; the test still checks the sandbox")
	}
	const inject = `
import fcntl, os, sys, termios
print("tty" if os.isatty(0) else "notty")
n = 0
for c in b"ZZZ":
    try:
        fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
        n += 1
    except OSError as e:
        print("denied", e.errno)
        break
print("injected", n)
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		// Control: on the host, with the pty as controlling terminal, the
		// same script injects.
		ctl := ptyRun(t, u, fx.ws, python, "-c", inject)
		if ctl.pending == 0 {
			t.Logf("control: TIOCSTI does not inject on this host (%q); only the sandbox result is checked", ctl.stdout)
		}
		r := ptyRun(t, u, fx.ws, binPath, "run", "-C", fx.ws, "--", python, "-c", inject)
		t.Logf("control: %q pending %d; sandbox: %q pending %d", ctl.stdout, ctl.pending, r.stdout, r.pending)
		if !strings.HasPrefix(r.stdout, "tty\n") {
			t.Errorf("stdin is not a tty inside the sandbox (a TTY must stay a TTY): %q %q", r.stdout, r.stderr)
		}
		if r.pending != 0 || strings.Contains(r.stdout, "injected 3") || !strings.Contains(r.stdout, "denied") {
			t.Errorf("TIOCSTI injected %d bytes into the terminal: stdout %q stderr %q", r.pending, r.stdout, r.stderr)
		}
	})
}

type ptyResult struct {
	stdout, stderr string
	pending        int // bytes waiting in the terminal's input queue afterwards
}

// ptyRun runs name with a fresh pty as stdin and controlling terminal, in a
// new session, as u.
func ptyRun(t *testing.T, u *testUser, dir, name string, args ...string) ptyResult {
	t.Helper()
	master, slave, err := openPty()
	if err != nil {
		t.Skipf("cannot allocate a pty: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	cmd := command(u, runOpts{dir: dir}, name, args...)
	cmd.Stdin = slave
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish", name)
	}
	return ptyResult{stdout: stdout.String(), stderr: stderr.String(), pending: inputPending(slave)}
}

// TestPtrace: the command cannot ptrace a sibling or write its memory.
func TestPtrace(t *testing.T) {
	needPython(t)
	const attach = `
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
time.sleep(0.1)
r = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
print("attach", r, ctypes.get_errno())
os.kill(pid, 9)
os.waitpid(pid, 0)
`
	// The child holds "AAAA"; the parent tries process_vm_writev("BBBB")
	// into it; the child writes what it holds to a file the host reads.
	const pvw = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(b"AAAA")
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)
    with open(sys.argv[1], "w") as f:
        f.write(buf.value.decode())
    os._exit(0)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
src = ctypes.create_string_buffer(b"BBBB")
local = iovec(ctypes.cast(src, ctypes.c_void_p), 4)
remote = iovec(ctypes.addressof(buf), 4)
libc.process_vm_writev.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
n = libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print("pvw", n, ctypes.get_errno())
os.write(w, b"x")
os.waitpid(pid, 0)
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		t.Run("ptrace-attach", func(t *testing.T) {
			ctl := host(t, u, runOpts{dir: fx.ws}, python, "-c", attach)
			if !strings.HasPrefix(ctl.stdout, "attach 0") {
				t.Logf("control: PTRACE_ATTACH fails on the host too: %v", ctl)
			}
			r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", python, "-c", attach)
			if !strings.HasPrefix(r.stdout, "attach -1") {
				t.Errorf("PTRACE_ATTACH of a sibling succeeded: %v", r)
			}
		})
		t.Run("strace", func(t *testing.T) {
			if _, err := exec.LookPath("/usr/bin/strace"); err != nil {
				t.Skip("no strace")
			}
			r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", "/bin/sh", "-c",
				`sleep 5 & p=$!; timeout 2 /usr/bin/strace -p $p -e trace=none 2>&1; kill $p; echo end`)
			if strings.Contains(r.stdout, "attached") || !strings.Contains(r.stdout, "end") {
				t.Errorf("strace -p attached to a sibling: %v", r)
			}
		})
		t.Run("process_vm_writev", func(t *testing.T) {
			ctlFile := filepath.Join(fx.ws, "pvw-control")
			ctl := host(t, u, runOpts{dir: fx.ws}, python, "-c", pvw, ctlFile)
			if b, _ := os.ReadFile(ctlFile); string(b) != "BBBB" {
				t.Logf("control: process_vm_writev does not work on the host (%q, %v)", b, ctl)
			}
			out := filepath.Join(fx.ws, "pvw-result")
			r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", python, "-c", pvw, out)
			assertContent(t, out, "AAAA")
			if t.Failed() {
				t.Logf("agentbox: %v", r)
			}
		})
	})
}

// TestIOUring: io_uring_setup fails inside the sandbox (io_uring can open
// sockets and files past a seccomp filter on socket(2) and open(2)).
func TestIOUring(t *testing.T) {
	needPython(t)
	const setup = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)  # io_uring_setup
print("fd", fd, ctypes.get_errno())
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		ctl := host(t, u, runOpts{dir: fx.ws}, python, "-c", setup)
		if strings.HasPrefix(ctl.stdout, "fd -1") {
			t.Skipf("io_uring is unavailable on the host already: %v", ctl)
		}
		r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", python, "-c", setup)
		if !strings.HasPrefix(r.stdout, "fd -1") {
			t.Errorf("io_uring_setup succeeded in the sandbox: %v", r)
		}
	})
}

// TestInheritedFds: descriptors the caller leaks to agentbox beyond stdio
// (a writable file and a directory outside every writable root) are not
// usable inside (runc CVE-2024-21626 style).
func TestInheritedFds(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		target := filepath.Join(fx.out, "file.txt")
		f, err := os.OpenFile(target, os.O_RDWR|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		d, err := os.Open(fx.out)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		cmd := command(u, runOpts{dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c",
			`echo pwned >&3; echo pwned >> /proc/self/fd/3; cd /proc/self/fd/4 && echo x > new; ls -l /proc/self/fd; echo end`)
		cmd.ExtraFiles = []*os.File{f, d}
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), "end") {
			t.Errorf("script did not finish: %v %s", err, out)
		}
		assertContent(t, target, fx.txt)
		assertAbsent(t, filepath.Join(fx.out, "new"))
		if t.Failed() {
			t.Logf("output: %s", out)
		}
	})
}

// TestProcIsolation: the sandbox has its own /proc: host processes are
// neither visible nor killable, and agentbox's own helper (pid 1 inside,
// if any) can be neither written through /proc nor have its binary
// replaced (CVE-2019-5736 style).
func TestProcIsolation(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		victim := command(u, runOpts{}, "/bin/sleep", "60")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer victim.Process.Kill()
		binHash := snapshot(t, binPath)[binPath]
		r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"VICTIM=" + fmt.Sprint(victim.Process.Pid)}}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `
echo "procs $(ls -d /proc/[0-9]* | wc -l)"
kill -9 "$VICTIM" 2>/dev/null && echo "killed-victim-pid"
(echo x >> /proc/1/exe) 2>/dev/null && echo "wrote-pid1-exe"
(printf x | dd of=/proc/1/mem bs=1 seek=4096 conv=notrunc) 2>/dev/null && echo "wrote-pid1-mem"
(echo x >> /proc/$PPID/exe) 2>/dev/null && echo "wrote-parent-exe"
echo end`)
		if !strings.Contains(r.stdout, "end") {
			t.Fatalf("run: %v", r)
		}
		var n int
		fmt.Sscanf(r.stdout, "procs %d", &n)
		if n == 0 || n > 10 {
			t.Errorf("%d processes visible in /proc inside the sandbox (host /proc?): %v", n, r)
		}
		for _, bad := range []string{"wrote-pid1-exe", "wrote-pid1-mem", "wrote-parent-exe"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("%s: %v", bad, r)
			}
		}
		time.Sleep(50 * time.Millisecond)
		if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("host: the sandbox killed host process %d: %v", victim.Process.Pid, err)
		}
		if h := snapshot(t, binPath)[binPath]; h != binHash {
			t.Errorf("host: agentbox binary changed: %s", h)
		}
	})
}

// TestKilledRunLeftovers: a run SIGKILLed while it holds placeholders for
// missing protected names leaves them behind at worst until the next run
// or `agentbox cleanup`; after cleanup the workspace is as it was.
func TestKilledRunLeftovers(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u, noCodex)
		before := snapshot(t, fx.dir)
		cmd := command(u, runOpts{dir: fx.ws, env: fx.env()}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `echo ready > "$WS/ready"; sleep 30`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) }) {
			cmd.Process.Kill()
			t.Fatal("command never became ready")
		}
		os.Remove(filepath.Join(fx.ws, "ready"))
		cmd.Process.Kill()
		cmd.Wait()
		time.Sleep(100 * time.Millisecond)
		if exists(filepath.Join(fx.ws, ".codex")) {
			t.Logf("after SIGKILL: placeholder %s/.codex left (expected until cleanup)", fx.ws)
		}
		r := runWith(t, u, runOpts{}, "cleanup")
		if r.code != 0 {
			t.Errorf("agentbox cleanup: %v", r)
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), nil) {
			t.Errorf("host after cleanup: %s", d)
		}
		recs, _ := os.ReadDir(filepath.Join(u.home, ".state", "agentbox", "placeholders"))
		for _, e := range recs {
			b, _ := os.ReadFile(filepath.Join(u.home, ".state", "agentbox", "placeholders", e.Name()))
			if strings.Contains(string(b), fx.dir) {
				t.Errorf("placeholder record %s left after cleanup: %q", e.Name(), b)
			}
		}
	})
}

// TestDoctorVersion: the other subcommands work for both users.
func TestDoctorVersion(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		if out, errOut, code := run(t, u, "version"); code != 0 || out == "" {
			t.Errorf("version: exit %d %q %q", code, out, errOut)
		}
		out, errOut, code := run(t, u, "doctor", "--json")
		if code != 0 || !strings.Contains(out, `"can_sandbox": true`) && !strings.Contains(out, `"can_sandbox":true`) {
			t.Errorf("doctor --json: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
	})
}
