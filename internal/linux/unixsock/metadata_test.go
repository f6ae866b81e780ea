package unixsock

import (
	"testing"

	"golang.org/x/net/bpf"

	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// TestMetadataProgramInVM: with metadata mediation every chmod, chown,
// utimes and xattr call of the architecture is handed to the supervisor,
// the calls it cannot rebuild get ENOSYS, chattr's ioctls EPERM; without
// it they are all allowed.
func TestMetadataProgramInVM(t *testing.T) {
	const tcgets = 0x5401
	for _, name := range []string{"amd64", "arm64"} {
		t.Run(name, func(t *testing.T) {
			with, without := vmFor(t, name, true, false), vmFor(t, name, false, false)
			run := func(vm *bpf.VM, sys string, args ...uint64) uint32 { return runSys(t, vm, name, sys, args...) }
			n := 0
			for sys := range metaCalls {
				if _, ok := seccomp.Number(name, sys); !ok {
					continue
				}
				n++
				if got := run(with, sys); got != RetUserNotif {
					t.Errorf("%s with mediation: %#x, want user-notif", sys, got)
				}
				if got := run(without, sys); got != RetAllow {
					t.Errorf("%s without mediation: %#x, want allow", sys, got)
				}
			}
			if want := map[string]int{"amd64": 18, "arm64": 12}[name]; n != want {
				t.Errorf("%d mediated calls, want %d", n, want)
			}
			for _, sys := range []string{"setxattrat", "removexattrat", "file_setattr"} {
				if got := run(with, sys); got != uint32(seccomp.ActENOSYS) {
					t.Errorf("%s: %#x, want ENOSYS", sys, got)
				}
			}
			for _, req := range []uint64{fsIocSetflags, fsIoc32Setflags, fsIocSetversion, fsIocFssetxattr} {
				if got := run(with, "ioctl", 3, req); got != RetErrnoEPERM {
					t.Errorf("ioctl %#x: %#x, want EPERM", req, got)
				}
			}
			if got := run(with, "ioctl", 0, tcgets); got != RetAllow {
				t.Errorf("ioctl TCGETS: %#x, want allow", got)
			}
			if got := run(with, "connect"); got != RetUserNotif {
				t.Errorf("connect: %#x, want user-notif", got)
			}
		})
	}
}
