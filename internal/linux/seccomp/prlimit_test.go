package seccomp

import "testing"

// TestPrlimitOtherProcessInVM: a process may change its own resource
// limits (pid 0, as libc's setrlimit passes), never another's: without a
// pid namespace that would reach agentbox's reaper.
func TestPrlimitOtherProcessInVM(t *testing.T) {
	const rlimitNofile = 7
	for _, archName := range []string{"amd64", "arm64"} {
		t.Run(archName, func(t *testing.T) {
			prog, err := BuildProgram(Options{Arch: archName})
			if err != nil {
				t.Fatal(err)
			}
			info := arches[archName]
			nr := info.nr["prlimit64"]
			for _, c := range []struct {
				args [6]uint64
				want Action
			}{
				{[6]uint64{0, rlimitNofile, 0x7ffd0000, 0}, ActAllow},
				{[6]uint64{0, rlimitNofile, 0, 0x7ffd0000}, ActAllow},
				{[6]uint64{4242, rlimitNofile, 0x7ffd0000, 0}, ActEPERM},
				{[6]uint64{1, rlimitNofile, 0, 0x7ffd0000}, ActEPERM},
				{[6]uint64{1 << 32, rlimitNofile, 0x7ffd0000, 0}, ActAllow}, // the kernel reads pid 0
			} {
				if got := run(t, prog, seccompData(info.auditArch, nr, c.args)); got != c.want {
					t.Errorf("prlimit64%v: got %v, want %v", c.args[:3], got, c.want)
				}
			}
		})
	}
}
