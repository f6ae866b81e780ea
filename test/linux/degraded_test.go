//go:build linux

package linux

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// degraded runs agentbox as fx's user where new user namespaces are
// forbidden by a filter like a container's (nouserns_test.go): as a plain
// uid with no capabilities, or as root with root's own.
func degraded(t *testing.T, fx *fixture, extra []string, script string) result {
	t.Helper()
	return degradedWith(t, fx, nil, extra, script)
}

// degradedWith is degraded with env added to agentbox's environment.
func degradedWith(t *testing.T, fx *fixture, env []string, extra []string, script string) result {
	t.Helper()
	return degradedOpts(t, fx, runOpts{env: env}, extra, script)
}

// degradedOpts is degraded with the options of the run (env, timeout).
func degradedOpts(t *testing.T, fx *fixture, o runOpts, extra []string, script string) result {
	t.Helper()
	needBin(t)
	args := []string{"run", "-C", fx.ws}
	args = append(args, extra...)
	args = append(args, "--", "/bin/sh", "-c", script)
	o.env = append(o.env, fx.env()...)
	o.dir = fx.ws
	return noUserns(t, fx.u, o, binPath, args...)
}

// degradedSysctl runs agentbox inside a fresh user namespace whose
// user.max_user_namespaces is 0. agentbox is root in that namespace, with
// its capabilities: only good for testing the refusal and its wording.
func degradedSysctl(t *testing.T, fx *fixture, extra []string, script string) result {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare(1) is needed to test the fallback: %v", err)
	}
	args := []string{"-Ur", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`, binPath, "run", "-C", fx.ws}
	args = append(args, extra...)
	args = append(args, "--", "/bin/sh", "-c", script)
	return host(t, fx.u, runOpts{env: fx.env(), dir: fx.ws}, "unshare", args...)
}

// TestDegradedRefusedWithoutOptIn: without user namespaces agentbox names
// the reason and every missing guarantee, and runs nothing.
func TestDegradedRefusedWithoutOptIn(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range []struct {
			name   string
			run    func(*testing.T, *fixture, []string, string) result
			reason string
		}{
			{"sysctl", degradedSysctl, "user.max_user_namespaces is 0"},
			{"seccomp", degraded, "seccomp filter"},
		} {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t, u)
				r := c.run(t, fx, nil, `echo ran > "$WS/ran.txt"`)
				if r.code != 125 {
					t.Errorf("exit %d, want 125: %v", r.code, r)
				}
				for _, want := range []string{c.reason, "protected paths", "--allow-degraded", "no network namespace", "no pid namespace"} {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("refusal does not mention %q: %q", want, r.stderr)
					}
				}
				assertAbsent(t, filepath.Join(fx.ws, "ran.txt"))
			})
		}
	})
}

// TestDegradedGuarantees: with --allow-degraded, Landlock and seccomp
// still confine writes and the network, say what is not enforced, and the
// whole tree still dies with the command.
func TestDegradedGuarantees(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tok := sleepToken()
		script := `echo in > "$WS/in.txt"
echo out > "$OUT/out.txt"
echo home > "$HOME/home.txt"
echo x >> "$OUT/file.txt"
ln "$OUT/file.txt" "$WS/hl2" && echo x >> "$WS/hl2"
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0))' 2>/dev/null && echo inet-allowed
echo x >> "$WS/.git/config" && echo git-writable
grep -E '^Cap(Eff|Prm|Inh|Amb|Bnd)' /proc/self/status
(setsid sleep ` + tok + ` &)
nohup sleep ` + tok + ` >/dev/null 2>&1 &
echo done`
		r := degraded(t, fx, []string{"--allow-degraded"}, script)
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("degraded run failed: %v", r)
		}
		// As documented (DegradedGaps, README): Landlock cannot keep
		// .git read-only inside the workspace, and the run says so.
		if !strings.Contains(r.stdout, "git-writable") || !strings.Contains(r.stderr, ".git") {
			t.Errorf(".git is not as documented for degraded mode (writable, and named in the warning): %v", r)
		}
		// No capability is left to the command; where the caller had
		// CAP_SETPCAP (root), the bounding set is emptied too.
		for _, l := range strings.Split(r.stdout, "\n") {
			f := strings.Fields(l)
			if len(f) != 2 || !strings.HasPrefix(f[0], "Cap") {
				continue
			}
			if (f[0] != "CapBnd:" || u.root()) && strings.Trim(f[1], "0") != "" {
				t.Errorf("the command holds capabilities: %q", l)
			}
		}
		if !strings.Contains(r.stdout, "CapEff:") {
			t.Errorf("capabilities not reported: %v", r)
		}
		if !strings.Contains(r.stderr, "running degraded") || !strings.Contains(r.stderr, "protected paths") {
			t.Errorf("degraded run does not say what is missing: %q", r.stderr)
		}
		assertContent(t, filepath.Join(fx.ws, "in.txt"), "in\n")
		assertAbsent(t, filepath.Join(fx.out, "out.txt"))
		assertAbsent(t, filepath.Join(fx.home, "home.txt"))
		assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
		if strings.Contains(r.stdout, "inet-allowed") {
			t.Error("offline degraded run could create an AF_INET socket")
		}
		if left := procsWith(tok); len(left) > 0 {
			t.Errorf("host: processes outlived the degraded run: %v", left)
			killPids(left)
		}
	})
}

// TestDegradedHostAbstractSocket: without a network namespace the abstract
// unix namespace is the host's; an abstract listener of the host (here the
// test process) must stay out of reach of an offline degraded run, although
// connects are performed by the init stage's supervisor, outside the
// command's Landlock domain.
func TestDegradedHostAbstractSocket(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		s := listenUnix(t, "@"+randName("agentbox-test-abstract-"))
		ctl := host(t, u, runOpts{}, python, "-c", unixClient, s.addr)
		if !strings.HasPrefix(ctl.stdout, "got hello") {
			t.Fatalf("control: host cannot connect either: %v", ctl)
		}
		s.hits.Store(0)
		r := degraded(t, fx, []string{"--allow-degraded"}, python+" -c '"+unixClient+"' '"+s.addr+"'; echo done")
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("degraded run failed: %v", r)
		}
		if n := s.hits.Load(); n != 0 || strings.Contains(r.stdout, "got") {
			t.Errorf("offline degraded run reached the host's abstract socket %s (%d connections): %v", s.addr, n, r)
		}
		if !strings.Contains(r.stdout, "refused") {
			t.Errorf("the client did not report a refusal: %v", r)
		}
	})
}

// shmClient looks a SysV shared memory segment up by key, attaches it by
// that id and by the id given, and writes into it: what a command could do
// to the host's segments without an IPC namespace.
const shmClient = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
key, shmid = int(sys.argv[1]), int(sys.argv[2])
found = libc.shmget(key, 0, 0)
print("shmget", "ok" if found >= 0 else "errno %d" % ctypes.get_errno())
for i in {shmid, found}:
    if i < 0:
        continue
    p = libc.shmat(i, None, 0)
    if p is None or p == ctypes.c_void_p(-1).value:
        print("shmat refused errno %d" % ctypes.get_errno())
        continue
    ctypes.memmove(p, b"pwned", 5)
    print("attached and wrote")
`

// hostShm creates a SysV shared memory segment that anyone may write,
// holding content, and removes it when the test ends.
func hostShm(t *testing.T, content string) (key, id int) {
	t.Helper()
	for {
		key = int(rand.Int32N(1<<30)) + 1
		var err error
		id, err = unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			t.Fatalf("shmget: %v", err)
		}
		break
	}
	t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	b, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatalf("shmat: %v", err)
	}
	copy(b, content)
	unix.SysvShmDetach(b)
	return key, id
}

func shmContent(t *testing.T, id, n int) string {
	t.Helper()
	b, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		t.Fatalf("shmat: %v", err)
	}
	defer unix.SysvShmDetach(b)
	return string(b[:n])
}

// TestDegradedHostSysVShm: without an IPC namespace the host's SysV
// shared memory is reachable by key and id; a degraded run must not be
// able to attach it, and the segment must be unchanged on the host.
func TestDegradedHostSysVShm(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		const orig = "host-data"
		ctlKey, ctlID := hostShm(t, orig)
		ctl := host(t, u, runOpts{}, python, "-c", shmClient, fmt.Sprint(ctlKey), fmt.Sprint(ctlID))
		if got := shmContent(t, ctlID, len(orig)); !strings.Contains(ctl.stdout, "attached and wrote") || got == orig {
			t.Fatalf("control: the host itself cannot write the segment (content %q): %v", got, ctl)
		}
		key, id := hostShm(t, orig)
		r := degraded(t, fx, []string{"--allow-degraded"}, fmt.Sprintf("%s -c '%s' %d %d; echo done", python, shmClient, key, id))
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("degraded run failed: %v", r)
		}
		if got := shmContent(t, id, len(orig)); got != orig {
			t.Errorf("host: segment %d now holds %q, want %q: %v", id, got, orig, r)
		}
		if strings.Contains(r.stdout, "attached") || !strings.Contains(r.stdout, "shmat refused") {
			t.Errorf("degraded run could attach the host's segment, or did not try: %v", r)
		}
	})
}
