//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The init stage's hardening steps (RunInit in internal/linux), each
// checked where the command can see it, so that removing one fails a test
// here: the credentials the command inherits (no_new_privs, every
// capability set, the locked securebits), its Landlock domains, and the
// flags of every mount. PR_SET_DUMPABLE has TestInitNotDumpable, the
// other threads' capabilities TestInitThreadsDropCapabilities.

// TestCommandCredentials: the command starts with no capability in any
// set (the bounding and inheritable sets included, which TestPrivileges
// does not look at), with no_new_privs and a seccomp filter, and with the
// securebits that make uid 0 an ordinary user locked: SECBIT_NOROOT,
// NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and NO_CAP_AMBIENT_RAISE, each locked
// (0xef). The init drops the bounding set and locks the securebits only
// while it holds CAP_SETPCAP in its user namespace, which it does for
// root and for a plain uid alike (ambient capabilities, launch_linux.go).
func TestCommandCredentials(t *testing.T) {
	needPython(t)
	const script = `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
"$PY" -c 'import ctypes; print("Securebits:", hex(ctypes.CDLL(None).prctl(27, 0, 0, 0, 0)))'`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "PY="+python)}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("probe failed: %v", r)
		}
		for _, want := range []string{
			"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
			"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
			"NoNewPrivs:\t1", "Seccomp:\t2", "Securebits: 0xef",
		} {
			if !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("want %q in the command's credentials:\n%s", want, r.stdout)
			}
		}
	})
}

// TestCommandLandlocked: the command runs under Landlock, which refuses
// writes the mounts would let through: /proc/self/comm is a file of the
// sandbox's own proc mount, writable by its owner, and outside every rule
// of the command's domain. The same write works on the host.
func TestCommandLandlocked(t *testing.T) {
	const script = `printf probe > /proc/self/comm && echo WROTE; echo done`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		if ctl := host(t, u, runOpts{dir: fx.ws}, "/bin/sh", "-c", script); !strings.Contains(ctl.stdout, "WROTE") {
			t.Fatalf("control: the host cannot write /proc/self/comm either: %v", ctl)
		}
		r := sandboxed(t, fx, nil, script)
		if r.code != 0 || !strings.HasSuffix(r.stdout, "done\n") {
			t.Fatalf("probe failed: %v", r)
		}
		if strings.Contains(r.stdout, "WROTE") {
			t.Errorf("the command wrote /proc/self/comm: it has no Landlock domain: %v", r)
		}
	})
}

// TestCommandCannotSignalInitThreads: the command's Landlock domain is its
// own, made on the one thread of the init it is forked from and scoped for
// signals (Landlock ABI 6): the init's other threads (the signal
// forwarder, the unix socket supervisor) are outside it, so the command
// cannot even probe them with signal 0, while its own thread of the init,
// in the same domain, it can. Without that thread-only domain the command
// shares the init's unscoped one and reaches every thread.
func TestCommandCannotSignalInitThreads(t *testing.T) {
	needPython(t)
	const probe = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
abi = libc.syscall(444, None, 0, 1)       # landlock_create_ruleset(VERSION)
errata = libc.syscall(444, None, 0, 2)    # landlock_create_ruleset(ERRATA)
if abi < 6 or (abi >= 6 and (errata < 0 or not errata & 2)):
    print("unscoped", abi, errata)
    raise SystemExit(0)
for tid in sorted(int(t) for t in os.listdir("/proc/1/task")):
    r = libc.syscall(234, 1, tid, 0)      # tgkill(1, tid, 0)
    if r != 0 and ctypes.get_errno() == 3:
        continue                          # ESRCH: the thread is gone
    print("tid", "main" if tid == 1 else "other", "ok" if r == 0 else "errno %d" % ctypes.get_errno())
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		// A lone run's init: its other threads (the supervisors) are
		// outside the command's Landlock domain. Through the resident
		// helper /proc/1 is the command's own small pid1, which shares
		// the command's domain and holds nothing the command may not
		// reach (killing it ends only this run).
		r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "AGENTBOX_RESIDENT=0")}, "run", "-C", fx.ws, "--", python, "-c", probe)
		if r.code != 0 {
			t.Fatalf("probe failed: %v", r)
		}
		if strings.HasPrefix(r.stdout, "unscoped") {
			t.Skipf("Landlock cannot scope signals on this kernel: %s", r.stdout)
		}
		if !strings.Contains(r.stdout, "tid main ok\n") {
			t.Errorf("the command cannot signal its own thread of the init (same domain): %v", r)
		}
		others := strings.Count(r.stdout, "tid other ")
		if others == 0 {
			t.Fatalf("the init has no other thread to probe: %v", r)
		}
		if denied := strings.Count(r.stdout, "tid other errno 1\n"); denied != others {
			t.Errorf("the command reached %d of the init's %d other threads (want EPERM from each): %v", others-denied, others, r)
		}
	})
}

// mountEntry is one line of /proc/self/mountinfo: the mount point and its
// per-mount options.
type mountEntry struct {
	point string
	opts  map[string]bool
}

func parseMountinfo(s string) []mountEntry {
	var out []mountEntry
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		e := mountEntry{point: strings.ReplaceAll(f[4], `\040`, " "), opts: map[string]bool{}}
		for _, o := range strings.Split(f[5], ",") {
			e.opts[o] = true
		}
		out = append(out, e)
	}
	return out
}

// TestMountFlags: every mount of the sandbox is nosuid; the host's tree
// is read-only, the workspace read-write with .git read-only; /proc,
// /sys and /dev are nodev and noexec where the host's are not, /sys and
// the host-wide knobs of /proc read-only, /dev read-only with a nodev
// /dev/shm. Each flag is one mount_setattr or mount flag in the init's
// mount_linux.go; the namespace and nothing else would catch its loss
// (a setuid binary, say, is also stopped by no_new_privs).
func TestMountFlags(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := sandboxed(t, fx, nil, `cat /proc/self/mountinfo`)
		if r.code != 0 {
			t.Fatalf("reading mountinfo failed: %v", r)
		}
		mounts := parseMountinfo(r.stdout)
		// The last mount at a point is the one the command sees.
		top := map[string]mountEntry{}
		for _, m := range mounts {
			if !m.opts["nosuid"] {
				t.Errorf("mount at %s is not nosuid: %v", m.point, m.opts)
			}
			top[m.point] = m
		}
		want := map[string][]string{
			"/":                            {"ro"},
			fx.ws:                          {"rw"},
			filepath.Join(fx.ws, ".git"):   {"ro"},
			"/proc":                        {"rw", "nodev", "noexec"},
			"/proc/sys":                    {"ro", "nodev", "noexec"},
			"/sys":                         {"ro", "nodev", "noexec"},
			"/dev":                         {"ro", "noexec"},
			"/dev/null":                    {"ro", "noexec"},
			"/dev/pts":                     {"noexec"},
			"/dev/shm":                     {"rw", "nodev"},
			filepath.Join(fx.ws, ".codex"): {"ro"},
		}
		for point, opts := range want {
			if _, err := os.Lstat(point); err != nil && !strings.HasPrefix(point, "/proc") && !strings.HasPrefix(point, "/sys") && !strings.HasPrefix(point, "/dev") {
				t.Fatalf("fixture lacks %s: %v", point, err)
			}
			m, ok := top[point]
			if !ok {
				t.Errorf("no mount at %s in the sandbox:\n%s", point, r.stdout)
				continue
			}
			for _, o := range opts {
				if !m.opts[o] {
					t.Errorf("mount at %s lacks %s: %v", point, o, m.opts)
				}
			}
		}
	})
}
