package seccomp

import "testing"

// TestAllowNewPIDInVM: a session's filter lets clone create a pid and an
// IPC namespace, and nothing else changes: every other namespace flag,
// alone or combined with those, and unshare(2) of them stay refused.
func TestAllowNewPIDInVM(t *testing.T) {
	const sigchld = 17
	for _, archName := range []string{"amd64", "arm64"} {
		for _, allow := range []bool{false, true} {
			prog, err := BuildProgram(Options{Arch: archName, RestrictSocketFamilies: true, AllowNewPID: allow})
			if err != nil {
				t.Fatal(err)
			}
			info := arches[archName]
			newpid := ActEPERM
			if allow {
				newpid = ActAllow
			}
			cases := []vmCase{
				{name: "clone NEWPID", sys: "clone", args: [6]uint64{cloneNewPID | sigchld}, want: newpid},
				// Go's fork: CLONE_VFORK|CLONE_VM|CLONE_PIDFD plus the pid namespace.
				{name: "clone NEWPID vfork", sys: "clone", args: [6]uint64{cloneNewPID | 0x4000 | 0x100 | 0x1000 | sigchld}, want: newpid},
				// The zygote's fork of a command: pid and IPC namespaces.
				{name: "clone NEWPID|NEWIPC vfork", sys: "clone", args: [6]uint64{cloneNewPID | cloneNewIPC | 0x4000 | 0x100 | 0x1000 | sigchld}, want: newpid},
				{name: "clone NEWIPC|NEWNET", sys: "clone", args: [6]uint64{cloneNewIPC | cloneNewNet | sigchld}, want: ActEPERM},
				{name: "unshare NEWIPC", sys: "unshare", args: [6]uint64{cloneNewIPC}, want: ActEPERM},
				{name: "clone NEWPID|NEWUSER", sys: "clone", args: [6]uint64{cloneNewPID | cloneNewUser | sigchld}, want: ActEPERM},
				{name: "clone NEWPID|NEWNS", sys: "clone", args: [6]uint64{cloneNewPID | cloneNewNS | sigchld}, want: ActEPERM},
				{name: "clone NEWUSER", sys: "clone", args: [6]uint64{cloneNewUser | sigchld}, want: ActEPERM},
				{name: "clone NEWNET", sys: "clone", args: [6]uint64{cloneNewNet}, want: ActEPERM},
				{name: "clone fork", sys: "clone", args: [6]uint64{sigchld}, want: ActAllow},
				{name: "unshare NEWPID", sys: "unshare", args: [6]uint64{cloneNewPID}, want: ActEPERM},
				{name: "clone3", sys: "clone3", want: ActENOSYS},
				{name: "ptrace", sys: "ptrace", want: ActEPERM},
			}
			for _, c := range cases {
				got := run(t, prog, seccompData(info.auditArch, info.nr[c.sys], c.args))
				if got != c.want {
					t.Errorf("%s allowNewPID=%v %s: got %v, want %v", archName, allow, c.name, got, c.want)
				}
			}
		}
	}
}
