package seccomp

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
)

// seccompData encodes a struct seccomp_data for x/net/bpf's VM.
//
// The kernel runs a seccomp filter over seccomp_data in native byte order
// (little-endian on amd64 and arm64): a 4-byte load at offset 0 yields nr,
// and a load at args[i]'s offset yields the argument's low 32 bits. The
// VM, written for packets, decodes every load as big-endian. So each
// 32-bit word is stored here big-endian at the offset where the kernel
// keeps it: nr at 0, arch at 4, and for each 64-bit argument the low word
// at 16+8i (where a little-endian machine keeps it) and the high word at
// 16+8i+4. The program only does aligned 4-byte loads, for which this
// reproduces what the kernel sees exactly.
func seccompData(arch, nr uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	be := binary.BigEndian
	be.PutUint32(b[offNr:], nr)
	be.PutUint32(b[offArch:], arch)
	for i, v := range args {
		be.PutUint32(b[argLow(i):], uint32(v))
		be.PutUint32(b[argLow(i)+4:], uint32(v>>32))
	}
	return b
}

func disassemble(prog []bpf.RawInstruction) string {
	insns, _ := bpf.Disassemble(prog)
	var sb strings.Builder
	for i, ins := range insns {
		fmt.Fprintf(&sb, "%4d: %v\n", i, ins)
	}
	return sb.String()
}

func run(t *testing.T, prog []bpf.RawInstruction, data []byte) Action {
	t.Helper()
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatalf("program has undecodable instructions:\n%s", disassemble(prog))
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("bpf.NewVM: %v\n%s", err, disassemble(prog))
	}
	got, err := vm.Run(data)
	if err != nil {
		t.Fatalf("vm.Run: %v", err)
	}
	return Action(uint32(got))
}

// Numbers of syscalls that must stay allowed, per architecture. They are
// not in the package's tables because no rule needs them.
var allowedSamples = map[string]map[string]uint32{
	"amd64": {"read": 0, "write": 1, "openat": 257, "getpid": 39, "execve": 59, "kill": 62},
	"arm64": {"read": 63, "write": 64, "openat": 56, "getpid": 172, "execve": 221, "kill": 129},
}

// optionSets are the filters the VM test checks.
var optionSets = []Options{
	{},
	{DenyInetSockets: true},
	{RestrictSocketFamilies: true},
	{DenyInetSockets: true, RestrictSocketFamilies: true},
	{DenyIPC: true},
	{DenyInetSockets: true, DenyIPC: true},
	{RestrictSocketFamilies: true, DenyIPC: true},
}

// exoticFamilies are socket families a network namespace does not
// isolate or that an offline command has no use for (linux/socket.h).
// AF_UNSPEC is here because socket(2) refuses it anyway.
var exoticFamilies = map[string]uint64{
	"AF_UNSPEC": 0, "AF_AX25": 3, "AF_IPX": 4, "AF_APPLETALK": 5, "AF_X25": 9,
	"AF_KEY": 15, "AF_PACKET": 17, "AF_RDS": 21, "AF_IRDA": 23, "AF_LLC": 26,
	"AF_CAN": 29, "AF_TIPC": 30, "AF_BLUETOOTH": 31, "AF_RXRPC": 33,
	"AF_PHONET": 35, "AF_CAIF": 37, "AF_ALG": 38, "AF_VSOCK": 40, "AF_KCM": 41,
	"AF_QIPCRTR": 42, "AF_SMC": 43, "AF_XDP": 44, "AF_MCTP": 45, "AF_MAX": 46,
	"255": 255, "0xffffffff": 0xffffffff,
}

// ipcSyscalls are the calls DenyIPC refuses.
var ipcSyscalls = []string{
	"shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
	"semget", "semop", "semtimedop", "semctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
}

type vmCase struct {
	name string
	arch uint32 // 0 means the program's own
	nr   uint32 // used when sys is ""
	sys  string
	args [6]uint64
	want Action
}

func TestProgramInVM(t *testing.T) {
	alwaysDenied := []string{
		"ptrace", "process_vm_readv", "process_vm_writev",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"bpf", "perf_event_open", "userfaultfd",
		"keyctl", "add_key", "request_key",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
		"mount", "umount2", "pivot_root", "move_mount", "open_tree", "open_tree_attr",
		"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
		"setns", "acct", "swapon", "swapoff", "reboot", "open_by_handle_at",
	}
	for _, archName := range []string{"amd64", "arm64"} {
		for _, o := range optionSets {
			opts := o
			opts.Arch = archName
			t.Run(fmt.Sprintf("%s/denyInet=%v/families=%v/ipc=%v", archName, opts.DenyInetSockets, opts.RestrictSocketFamilies, opts.DenyIPC), func(t *testing.T) {
				prog, err := BuildProgram(opts)
				if err != nil {
					t.Fatal(err)
				}
				info := arches[archName]
				var cases []vmCase
				for _, s := range alwaysDenied {
					cases = append(cases, vmCase{name: s, sys: s, want: ActEPERM})
				}
				for s, nr := range allowedSamples[archName] {
					cases = append(cases, vmCase{name: s, nr: nr, want: ActAllow})
				}
				// inet is the answer for the families a network
				// namespace isolates; exotic for the others.
				inet, exotic := ActAllow, ActAllow
				if opts.DenyInetSockets {
					inet, exotic = ActEPERM, ActEPERM
				}
				if opts.RestrictSocketFamilies {
					exotic = ActEPERM
				}
				ipc := ActAllow
				if opts.DenyIPC {
					ipc = ActEPERM
				}
				for _, s := range ipcSyscalls {
					cases = append(cases, vmCase{name: s, sys: s, args: [6]uint64{0, 4096, 0o1666}, want: ipc})
				}
				const sigchld = 17
				threadFlags := uint64(0x3d0f00) // CLONE_VM|FS|FILES|SIGHAND|SYSVSEM|THREAD|SETTLS|PARENT_SETTID|CHILD_CLEARTID
				cases = append(cases,
					vmCase{name: "clone fork", sys: "clone", args: [6]uint64{sigchld}, want: ActAllow},
					vmCase{name: "clone thread", sys: "clone", args: [6]uint64{threadFlags}, want: ActAllow},
					vmCase{name: "clone vfork+pidfd (Go os/exec)", sys: "clone", args: [6]uint64{0x4000 | 0x100 | 0x1000 | sigchld}, want: ActAllow},
					vmCase{name: "clone NEWUSER", sys: "clone", args: [6]uint64{cloneNewUser | sigchld}, want: ActEPERM},
					vmCase{name: "clone NEWNS", sys: "clone", args: [6]uint64{cloneNewNS | sigchld}, want: ActEPERM},
					vmCase{name: "clone NEWNET", sys: "clone", args: [6]uint64{cloneNewNet}, want: ActEPERM},
					vmCase{name: "clone NEWUSER in arg1 only", sys: "clone", args: [6]uint64{sigchld, cloneNewUser}, want: ActAllow},
					vmCase{name: "clone3", sys: "clone3", want: ActENOSYS},
					vmCase{name: "unshare NEWUSER", sys: "unshare", args: [6]uint64{cloneNewUser}, want: ActEPERM},
					vmCase{name: "unshare NEWUSER|NEWNS", sys: "unshare", args: [6]uint64{cloneNewUser | cloneNewNS}, want: ActEPERM},
					vmCase{name: "unshare NEWTIME", sys: "unshare", args: [6]uint64{cloneNewTime}, want: ActEPERM},
					vmCase{name: "unshare NEWCGROUP", sys: "unshare", args: [6]uint64{cloneNewCgroup}, want: ActEPERM},
					vmCase{name: "unshare FILES", sys: "unshare", args: [6]uint64{0x400}, want: ActAllow},
					vmCase{name: "unshare FS", sys: "unshare", args: [6]uint64{0x200}, want: ActAllow},
					vmCase{name: "ioctl TIOCSTI", sys: "ioctl", args: [6]uint64{0, tiocsti}, want: ActEPERM},
					// The kernel truncates the request to unsigned int, so
					// garbage in the high word must not help.
					vmCase{name: "ioctl TIOCSTI high bits", sys: "ioctl", args: [6]uint64{0, 0xdeadbeef_00000000 | tiocsti}, want: ActEPERM},
					vmCase{name: "ioctl TIOCLINUX", sys: "ioctl", args: [6]uint64{0, tioclinux}, want: ActEPERM},
					vmCase{name: "ioctl TCGETS", sys: "ioctl", args: [6]uint64{0, 0x5401}, want: ActAllow},
					vmCase{name: "ioctl TIOCGWINSZ", sys: "ioctl", args: [6]uint64{1, 0x5413}, want: ActAllow},
					vmCase{name: "ioctl fd=TIOCSTI", sys: "ioctl", args: [6]uint64{tiocsti, 0x5401}, want: ActAllow},
					vmCase{name: "socket AF_UNIX", sys: "socket", args: [6]uint64{afUnix, 1}, want: ActAllow},
					vmCase{name: "socket AF_UNIX high bits", sys: "socket", args: [6]uint64{0xffffffff_00000000 | afUnix, 1}, want: ActAllow},
					vmCase{name: "socket AF_INET", sys: "socket", args: [6]uint64{2, 1}, want: inet},
					vmCase{name: "socket AF_INET6", sys: "socket", args: [6]uint64{10, 2}, want: inet},
					vmCase{name: "socket AF_NETLINK", sys: "socket", args: [6]uint64{16, 3}, want: inet},
					vmCase{name: "socket AF_INET high bits AF_UNIX", sys: "socket", args: [6]uint64{1<<32 | 2, 1}, want: inet},
					vmCase{name: "socketpair AF_UNIX", sys: "socketpair", args: [6]uint64{afUnix, 1}, want: ActAllow},
					vmCase{name: "socketpair AF_INET", sys: "socketpair", args: [6]uint64{2, 1}, want: inet},
					vmCase{name: "socket AF_VSOCK high bits AF_UNIX", sys: "socket", args: [6]uint64{1<<32 | 40, 1}, want: exotic},
					vmCase{name: "socket AF_UNIX in high bits only", sys: "socket", args: [6]uint64{afUnix << 32, 1}, want: exotic},
				)
				for name, fam := range exoticFamilies {
					cases = append(cases,
						vmCase{name: "socket " + name, sys: "socket", args: [6]uint64{fam, 1}, want: exotic},
						vmCase{name: "socketpair " + name, sys: "socketpair", args: [6]uint64{fam, 1}, want: exotic})
				}
				// A foreign architecture is denied whatever the number.
				foreign := []uint32{auditArchI386, auditArchARM, auditArchAArch64}
				if archName == "arm64" {
					foreign[2] = auditArchX86_64
				}
				for _, fa := range foreign {
					for _, nr := range []uint32{0, 1, 20, 39, 172} {
						cases = append(cases, vmCase{name: fmt.Sprintf("foreign arch %#x nr %d", fa, nr), arch: fa, nr: nr, want: ActEPERM})
					}
				}
				if info.hasX32 {
					cases = append(cases,
						vmCase{name: "x32 getpid", nr: x32SyscallBit | 39, want: ActEPERM},
						vmCase{name: "x32 write", nr: x32SyscallBit | 1, want: ActEPERM},
						vmCase{name: "x32 range end", nr: 0x7fffffff, want: ActEPERM})
				} else {
					// No x32 on arm64: such a number is the kernel's ENOSYS
					// to give, and the filter has no reason to touch it.
					cases = append(cases, vmCase{name: "x32-looking nr", nr: x32SyscallBit | 172, want: ActAllow})
				}

				for _, c := range cases {
					arch := info.auditArch
					if c.arch != 0 {
						arch = c.arch
					}
					nr := c.nr
					if c.sys != "" {
						var ok bool
						if nr, ok = info.nr[c.sys]; !ok {
							t.Fatalf("%s: no number for %s", c.name, c.sys)
						}
					}
					got := run(t, prog, seccompData(arch, nr, c.args))
					if got != c.want {
						t.Errorf("%s (arch %#x nr %d args %#x): got %v, want %v", c.name, arch, nr, c.args, got, c.want)
					}
				}
				if t.Failed() {
					t.Logf("program:\n%s", disassemble(prog))
				}
			})
		}
	}
}

func TestBuildProgramDeterministic(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		a, err := BuildProgram(Options{Arch: arch, RestrictSocketFamilies: true, DenyIPC: true})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := BuildProgram(Options{Arch: arch, RestrictSocketFamilies: true, DenyIPC: true})
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: two builds differ", arch)
		}
	}
}

func TestBuildProgramRejects(t *testing.T) {
	for _, arch := range []string{"", "386", "riscv64", "AMD64"} {
		if _, err := BuildProgram(Options{Arch: arch}); err == nil {
			t.Errorf("BuildProgram(Arch=%q) succeeded", arch)
		}
	}
}

// Every rule must name a syscall that both tables know, so that adding a
// rule without its numbers fails here rather than at run time on the
// other architecture.
func TestRulesHaveNumbers(t *testing.T) {
	var all []Rule
	for _, o := range optionSets {
		all = append(all, Rules(o)...)
	}
	for arch, info := range arches {
		for _, r := range all {
			// A legacy syscall is amd64's alone, and must be there.
			if _, ok := info.nr[r.Syscall]; !ok && !(r.Legacy && arch != "amd64") {
				t.Errorf("%s: rule %v has no syscall number", arch, r)
			}
		}
	}
}

// Every syscall DenyIPC promises to refuse has a rule, and the rules are
// exactly those.
func TestIPCRulesComplete(t *testing.T) {
	have := map[string]bool{}
	for _, r := range Rules(Options{DenyIPC: true}) {
		have[r.Syscall] = true
	}
	for _, r := range Rules(Options{}) {
		delete(have, r.Syscall)
	}
	for _, s := range ipcSyscalls {
		if !have[s] {
			t.Errorf("DenyIPC has no rule for %s", s)
		}
		delete(have, s)
	}
	for s := range have {
		t.Errorf("DenyIPC has a rule for %s, which the test does not know", s)
	}
}

// Build with a table of its own: masked comparisons, conjunctions and the
// notify action, as the unix-socket filter uses them.
func TestBuildCustomTable(t *testing.T) {
	rules := []Rule{
		{Syscall: "connect", Action: ActNotify},
		{Syscall: "socket", Match: All{OneOf{Arg: 0, Values: []uint32{afUnix}}, NoneOf{Arg: 1, Mask: 0xf, Values: []uint32{1, 5}}}, Action: ActEPERM},
		{Syscall: "ioctl", Match: OneOf{Arg: 1, Mask: 0xff00, Values: []uint32{0x5400}}, Action: ActENOSYS},
	}
	for _, archName := range []string{"amd64", "arm64"} {
		prog, err := Build(archName, rules)
		if err != nil {
			t.Fatal(err)
		}
		audit, _ := AuditArch(archName)
		nr := func(s string) uint32 { n, _ := Number(archName, s); return n }
		for _, c := range []struct {
			name string
			nr   uint32
			args [6]uint64
			want Action
		}{
			{"connect", nr("connect"), [6]uint64{3}, ActNotify},
			{"unix dgram", nr("socket"), [6]uint64{afUnix, 2}, ActEPERM},
			{"unix dgram|cloexec", nr("socket"), [6]uint64{afUnix, 2 | 0x80000}, ActEPERM},
			{"unix stream|cloexec", nr("socket"), [6]uint64{afUnix, 1 | 0x80000}, ActAllow},
			{"unix seqpacket", nr("socket"), [6]uint64{afUnix, 5}, ActAllow},
			{"inet dgram", nr("socket"), [6]uint64{afInet, 2}, ActAllow},
			{"ioctl 0x54xx", nr("ioctl"), [6]uint64{0, 0x5412}, ActENOSYS},
			{"ioctl other", nr("ioctl"), [6]uint64{0, 0x8912}, ActAllow},
			{"no rule", nr("ptrace"), [6]uint64{}, ActAllow},
		} {
			if got := run(t, prog, seccompData(audit, c.nr, c.args)); got != c.want {
				t.Errorf("%s %s: %v, want %v\n%s", archName, c.name, got, c.want, disassemble(prog))
			}
		}
	}
	// Without a notify rule the program carries no notify return.
	prog, err := Build("amd64", rules[1:])
	if err != nil {
		t.Fatal(err)
	}
	insns, _ := bpf.Disassemble(prog)
	for _, ins := range insns {
		if r, ok := ins.(bpf.RetConstant); ok && r.Val == uint32(ActNotify) {
			t.Errorf("notify return emitted without a notify rule:\n%s", disassemble(prog))
		}
	}
}

// No set-user-ID or set-group-ID file can be made: by chmod, by the mode
// of a created file, by mknod; openat2 falls back to openat.
func TestSetidInVM(t *testing.T) {
	const suid, sgid = 0o4000, 0o2000
	for _, archName := range []string{"amd64", "arm64"} {
		prog, err := BuildProgram(Options{Arch: archName})
		if err != nil {
			t.Fatal(err)
		}
		audit, _ := AuditArch(archName)
		nr := func(s string) uint32 {
			n, ok := Number(archName, s)
			if !ok {
				t.Fatalf("%s: no %s", archName, s)
			}
			return n
		}
		cases := []struct {
			name string
			nr   uint32
			args [6]uint64
			want Action
		}{
			{"fchmod 4755", nr("fchmod"), [6]uint64{3, suid | 0o755}, ActEPERM},
			{"fchmod 2755", nr("fchmod"), [6]uint64{3, sgid | 0o755}, ActEPERM},
			{"fchmod 0755", nr("fchmod"), [6]uint64{3, 0o755}, ActAllow},
			{"fchmod sticky 1777", nr("fchmod"), [6]uint64{3, 0o1777}, ActAllow},
			{"fchmodat 4755", nr("fchmodat"), [6]uint64{0, 0, suid | 0o755}, ActEPERM},
			{"fchmodat 0644", nr("fchmodat"), [6]uint64{0, 0, 0o644}, ActAllow},
			{"fchmodat2 6755", nr("fchmodat2"), [6]uint64{0, 0, suid | sgid | 0o755, 0}, ActEPERM},
			{"openat O_CREAT 4755", nr("openat"), [6]uint64{0, 0, 0o101, suid | 0o755}, ActEPERM},
			{"openat O_TMPFILE 2755", nr("openat"), [6]uint64{0, 0, 0o20200002, sgid | 0o755}, ActEPERM},
			{"openat O_CREAT 0644", nr("openat"), [6]uint64{0, 0, 0o101, 0o644}, ActAllow},
			{"openat no O_CREAT, junk mode", nr("openat"), [6]uint64{0, 0, 0, suid}, ActAllow},
			{"mknodat S_IFREG|4755", nr("mknodat"), [6]uint64{0, 0, 0o100000 | suid | 0o755, 0}, ActEPERM},
			{"openat2", nr("openat2"), [6]uint64{}, ActENOSYS},
		}
		if archName == "amd64" {
			cases = append(cases, []struct {
				name string
				nr   uint32
				args [6]uint64
				want Action
			}{
				{"chmod 4755", nr("chmod"), [6]uint64{0, suid | 0o755}, ActEPERM},
				{"chmod 0755", nr("chmod"), [6]uint64{0, 0o755}, ActAllow},
				{"open O_CREAT 4755", nr("open"), [6]uint64{0, 0o101, suid | 0o755}, ActEPERM},
				{"open O_RDONLY", nr("open"), [6]uint64{0, 0, 0}, ActAllow},
				{"creat 6755", nr("creat"), [6]uint64{0, suid | sgid | 0o755}, ActEPERM},
				{"mknod 4755", nr("mknod"), [6]uint64{0, 0o100000 | suid | 0o755}, ActEPERM},
			}...)
		}
		for _, c := range cases {
			if got := run(t, prog, seccompData(audit, c.nr, c.args)); got != c.want {
				t.Errorf("%s %s: %v, want %v", archName, c.name, got, c.want)
			}
		}
	}
}
