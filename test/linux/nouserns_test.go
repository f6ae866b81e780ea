//go:build linux

package linux

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The degraded-mode tests need a place where new user namespaces are
// forbidden, without changing the host's settings (other runs share the
// machine) and without running agentbox as root inside a user namespace
// (where it would hold every capability). They use what containers do:
// the test binary doubles as a wrapper that installs a seccomp filter
// mimicking Docker's default profile for an unprivileged container, then
// execs agentbox as the test user: a plain uid keeps its empty capability
// sets, root keeps its own.
//
// Docker's profile (moby profiles/seccomp/default.json) allows clone only
// when no namespace flag is set (mask 0x7E020000), answers clone3 with
// ENOSYS so that libcs fall back to clone, and allows unshare, setns and
// mount only to a container with CAP_SYS_ADMIN; anything not listed fails
// with EPERM.
const wrapperEnv = "AGENTBOX_TEST_WRAPPER"

// cloneNamespaceFlags is Docker's mask: CLONE_NEWNS, NEWCGROUP, NEWUTS,
// NEWIPC, NEWUSER, NEWPID, NEWNET.
const cloneNamespaceFlags = 0x7E020000

var wrapperPath string // a copy of the test binary every test user may run

// wrapperMain runs instead of the tests when the binary is the wrapper.
func wrapperMain() {
	if os.Getenv(wrapperEnv) == attackMode {
		os.Exit(residentAttackMain(os.Args[1:]))
	}
	if err := installNoUserns(); err != nil {
		fmt.Fprintln(os.Stderr, "nouserns wrapper:", err)
		os.Exit(121)
	}
	os.Unsetenv(wrapperEnv)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "nouserns wrapper: no command")
		os.Exit(121)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nouserns wrapper:", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "nouserns wrapper: exec:", err)
	os.Exit(126)
}

// noUsernsFilter is the Docker-like program for the native architecture.
func noUsernsFilter() ([]bpf.RawInstruction, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = 0xC000003E
	case "arm64":
		arch = 0xC00000B7
	default:
		return nil, fmt.Errorf("no audit arch for %s", runtime.GOARCH)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		bpf.RetConstant{Val: eperm},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_UNSHARE, SkipTrue: 3},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SETNS, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_MOUNT, SkipTrue: 1},
		bpf.Jump{Skip: 1},
		bpf.RetConstant{Val: eperm},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
		bpf.RetConstant{Val: enosys},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 3},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // low word of args[0], the flags (little-endian)
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaceFlags, SkipFalse: 1},
		bpf.RetConstant{Val: eperm},
		bpf.RetConstant{Val: allow},
	})
}

func installNoUserns() error {
	prog, err := noUsernsFilter()
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	runtime.LockOSThread()
	// A plain uid needs no_new_privs to install a filter (Docker sets it
	// for its containers by default too).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	runtime.KeepAlive(filter)
	return nil
}

// setupWrapper copies the test binary where every test user can run it.
func setupWrapper() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	wrapperPath = filepath.Join(baseDir, "bin", "nouserns")
	return os.WriteFile(wrapperPath, b, 0o755)
}

// noUserns runs name with args as u under the Docker-like filter.
func noUserns(t testing.TB, u *testUser, o runOpts, name string, args ...string) result {
	t.Helper()
	o.env = append(o.env, wrapperEnv+"=nouserns")
	return host(t, u, o, wrapperPath, append([]string{name}, args...)...)
}

// TestNoUsernsWrapper is the control for every degraded test: under the
// wrapper, user namespaces really are refused, and a plain uid really
// holds no capability at all.
func TestNoUsernsWrapper(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		r := noUserns(t, u, runOpts{}, "unshare", "-U", "true")
		if r.code == 0 {
			t.Fatalf("unshare -U succeeded under the wrapper: %v", r)
		}
		r = noUserns(t, u, runOpts{}, "grep", "^Cap[PEIA]", "/proc/self/status")
		if r.code != 0 {
			t.Fatalf("reading capabilities: %v", r)
		}
		if !u.root() {
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if f := strings.Fields(l); len(f) != 2 || strings.Trim(f[1], "0") != "" {
					t.Errorf("plain uid holds capabilities under the wrapper: %q", l)
				}
			}
		}
	})
}
