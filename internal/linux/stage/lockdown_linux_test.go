package stage

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// execProbeEnv runs TestNoNewPrivsAloneKeepsExecEmpty's child: "nnp" sets
// no_new_privs before emptying the capability sets, "none" does not.
const execProbeEnv = "AGENTBOX_TEST_EXEC_PROBE"

// TestNoNewPrivsAloneKeepsExecEmpty is the fact dropCapabilities rests on
// for the threads and callers whose securebits and bounding set it leaves
// alone: with no_new_privs set and the capability sets emptied, an execve
// as uid 0 grants no capability, though the securebits are the default
// ones (SECBIT_NOROOT clear) and the bounding set is full. The control,
// the same without no_new_privs, shows the exec would otherwise make root
// whole again. It also shows that emptying the sets clears the ambient
// set, which dropCapabilities therefore does not clear separately.
func TestNoNewPrivsAloneKeepsExecEmpty(t *testing.T) {
	if mode := os.Getenv(execProbeEnv); mode != "" {
		execProbe(t, mode)
		return
	}
	run := func(mode string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoNewPrivsAloneKeepsExecEmpty$", "-test.count=1")
		cmd.Env = append(os.Environ(), execProbeEnv+"="+mode)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			// uid 0 of a user namespace of its own: every capability
			// there, the ambient set raised, and exec as root.
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
			AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN},
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "SKIP") {
				t.Skipf("probe: %s", out)
			}
			t.Fatalf("probe %s: %v\n%s", mode, err, out)
		}
		return string(out)
	}
	ctl := run("none")
	if !strings.Contains(ctl, "Uid:\t0\t0") || strings.Contains(ctl, "CapEff:\t0000000000000000") {
		t.Fatalf("control: exec as root without no_new_privs should regain capabilities:\n%s", ctl)
	}
	got := run("nnp")
	for _, want := range []string{"Uid:\t0\t0", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
		"CapEff:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q after exec with no_new_privs and empty sets:\n%s", want, got)
		}
	}
	if strings.Contains(got, "CapBnd:\t0000000000000000") {
		t.Errorf("the bounding set was emptied; the probe must leave it full:\n%s", got)
	}
}

// execProbe runs in the child: as uid 0 with every capability of its user
// namespace, it empties this thread's capability sets (after no_new_privs
// for "nnp"), and execs a shell that prints its credentials.
func execProbe(t *testing.T, mode string) {
	runtime.LockOSThread()
	if mode == "nnp" {
		if err := thisThread(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		t.Fatal(errno)
	}
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", "grep -E '^(Uid|Cap|NoNewPrivs)' /proc/self/status"}, os.Environ())
	t.Fatalf("exec: %v", err)
}
