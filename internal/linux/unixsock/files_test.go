package unixsock

import (
	"testing"

	"golang.org/x/net/bpf"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// TestFilesProgramInVM: with file observation, an open or openat wakes
// the supervisor only with a write access mode, O_CREAT or O_TRUNC (so
// reads never do), openat2 and every name-changing call always do, the
// metadata calls do unless metadata is mediated (then they are mediated
// as before), and connect stays notified; without observation all of
// them are allowed.
func TestFilesProgramInVM(t *testing.T) {
	const (
		oRdonly    = 0
		oCloexec   = 0o2000000
		oDirectory = 0o200000
		oAppend    = 0o2000
		oNonblock  = 0o4000
	)
	for _, name := range []string{"amd64", "arm64"} {
		t.Run(name, func(t *testing.T) {
			run := func(vm *bpf.VM, sys string, args ...uint64) uint32 {
				t.Helper()
				return runSys(t, vm, name, sys, args...)
			}
			obs, metaObs, none := vmFor(t, name, false, true), vmFor(t, name, true, true), vmFor(t, name, false, false)
			opens := []struct {
				flags uint64
				want  uint32
			}{
				{oRdonly, RetAllow},
				{oRdonly | oCloexec, RetAllow},
				{oRdonly | oDirectory | oNonblock | oCloexec, RetAllow},
				{oAppend, RetAllow}, // O_RDONLY|O_APPEND writes nothing
				{oWronly, RetUserNotif},
				{oRdwr | oCloexec, RetUserNotif},
				{oCreat, RetUserNotif},
				{oTrunc, RetUserNotif},
				{oWronly | oCreat | oTrunc | oCloexec, RetUserNotif},
				{oTmpfile | oDirectory | oRdwr, RetUserNotif},
				// The high word is not the kernel's flags (int).
				{1 << 32, RetAllow},
			}
			for _, o := range opens {
				if got := run(obs, "openat", 0xffffff9c, 0x1000, o.flags); got != o.want {
					t.Errorf("openat flags %#o: %#x, want %#x", o.flags, got, o.want)
				}
				if got := run(none, "openat", 0xffffff9c, 0x1000, o.flags); got != RetAllow {
					t.Errorf("openat flags %#o without observation: %#x, want allow", o.flags, got)
				}
				if name == "amd64" {
					if got := run(obs, "open", 0x1000, o.flags); got != o.want {
						t.Errorf("open flags %#o: %#x, want %#x", o.flags, got, o.want)
					}
				}
			}
			for sys := range fileCalls {
				if _, ok := seccomp.Number(name, sys); !ok || sys == "open" || sys == "openat" {
					continue
				}
				if got := run(obs, sys); got != RetUserNotif {
					t.Errorf("%s: %#x, want user-notif", sys, got)
				}
				if got := run(none, sys); got != RetAllow {
					t.Errorf("%s without observation: %#x, want allow", sys, got)
				}
			}
			for sys, c := range metaCalls {
				if _, ok := seccomp.Number(name, sys); !ok {
					continue
				}
				want := uint32(RetUserNotif)
				if c.path < 0 {
					want = RetAllow // a descriptor's file
				}
				if got := run(obs, sys, 3, 0x1000); got != want {
					t.Errorf("%s observed: %#x, want %#x", sys, got, want)
				}
				if c.nullPathIsFd {
					// futimens: utimensat(fd, NULL, ...).
					if got := run(obs, sys, 3, 0); got != RetAllow {
						t.Errorf("%s with a NULL path: %#x, want allow", sys, got)
					}
				}
				if got := run(metaObs, sys); got != RetUserNotif {
					t.Errorf("%s mediated and observed: %#x, want user-notif", sys, got)
				}
			}
			for _, vm := range []*bpf.VM{obs, metaObs} {
				if got := run(vm, "connect"); got != RetUserNotif {
					t.Errorf("connect: %#x, want user-notif", got)
				}
				for _, sys := range []string{"ioctl", "socket", "prlimit64"} {
					if got := run(vm, sys, 0, 0x5401); got != RetAllow {
						t.Errorf("%s: %#x, want allow", sys, got)
					}
				}
			}
			if got := run(metaObs, "setxattrat"); got != uint32(seccomp.ActENOSYS) {
				t.Errorf("setxattrat with mediation: %#x, want ENOSYS", got)
			}
		})
	}
}

func TestOpenOutcome(t *testing.T) {
	for _, c := range []struct {
		flags         uint64
		exists, isDir bool
		want          string
	}{
		{oWronly, true, false, fsreport.OpWrite},
		{oRdwr, true, false, fsreport.OpWrite},
		{oTrunc, true, false, fsreport.OpWrite},
		{oWronly, false, false, ""}, // ENOENT
		{oWronly | oCreat, false, false, fsreport.OpCreate},
		{oCreat, true, false, ""},                   // O_RDONLY|O_CREAT on a file that exists changes nothing
		{oWronly | oCreat | oExcl, true, false, ""}, // EEXIST
		{oWronly | oCreat | oExcl, false, false, fsreport.OpCreate},
		{oWronly, true, true, ""}, // EISDIR
		{oTmpfile | oRdwr, true, true, fsreport.OpCreate},
		{oTmpfile | oRdwr, false, false, ""},
		{oPath | oCreat | oWronly, false, false, ""}, // O_PATH drops O_CREAT and the access mode
	} {
		if got := openOutcome(c.flags, c.exists, c.isDir); got != c.want {
			t.Errorf("openOutcome(%#o, exists %v, dir %v) = %q, want %q", c.flags, c.exists, c.isDir, got, c.want)
		}
	}
}
