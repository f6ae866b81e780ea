package seccomp

import (
	"fmt"
	"strings"
)

// Action is a seccomp filter return value (SECCOMP_RET_*).
type Action uint32

// Linux errno values. They are spelled out instead of taken from package
// syscall because this file compiles on every GOOS, and syscall.EPERM on
// Windows is not the Linux number. Both supported architectures use the
// generic errno table.
const (
	errnoEPERM  = 1
	errnoENOSYS = 38
)

const (
	retErrno     Action = 0x00050000 // SECCOMP_RET_ERRNO; low 16 bits are the errno
	retAllow     Action = 0x7fff0000 // SECCOMP_RET_ALLOW
	retUserNotif Action = 0x7fc00000 // SECCOMP_RET_USER_NOTIF
)

const (
	// ActAllow lets the syscall run.
	ActAllow = retAllow
	// ActEPERM fails the syscall with EPERM. Denials use an errno rather
	// than killing the process so that tools print an ordinary
	// "operation not permitted" and the agent can read it.
	ActEPERM = retErrno | errnoEPERM
	// ActENOSYS fails the syscall with ENOSYS, which libc treats as
	// "kernel too old" and answers by falling back to an older syscall.
	ActENOSYS = retErrno | errnoENOSYS
	// ActNotify hands the syscall to the filter's user-space listener
	// (seccomp_unotify(2)), which decides and answers for it.
	ActNotify = retUserNotif
)

func (a Action) String() string {
	switch a {
	case ActAllow:
		return "allow"
	case ActEPERM:
		return "errno(EPERM)"
	case ActENOSYS:
		return "errno(ENOSYS)"
	case ActNotify:
		return "user-notif"
	}
	if a&0xffff0000 == retErrno {
		return fmt.Sprintf("errno(%d)", a&0xffff)
	}
	return fmt.Sprintf("action(%#x)", uint32(a))
}

// Matcher is a condition on a syscall's arguments. Only the
// implementations in this package exist (the interface has an unexported
// method), so every matcher has a known translation to BPF.
//
// All matchers compare the low 32 bits of an argument only. That is
// exact for every argument this package inspects: ioctl's request and
// socket's family are truncated to 32 bits by the kernel, clone takes
// lower_32_bits of its flags, and unshare rejects any high bit with
// EINVAL on its own. Ignoring the high word therefore cannot turn a
// denied call into an allowed one, and it keeps the program short.
type Matcher interface {
	fmt.Stringer
	emit(a *assembler, match, nomatch string)
}

// AnyBitSet matches when the argument has at least one of Bits set.
type AnyBitSet struct {
	Arg  int
	Bits uint32
}

func (m AnyBitSet) String() string { return fmt.Sprintf("arg%d&%#x!=0", m.Arg, m.Bits) }

// OneOf matches when the argument, ANDed with Mask unless Mask is 0,
// equals one of Values.
type OneOf struct {
	Arg    int
	Mask   uint32
	Values []uint32
}

func (m OneOf) String() string {
	return fmt.Sprintf("%s in %s", argString(m.Arg, m.Mask), hexList(m.Values))
}

// NoneOf matches when the argument, ANDed with Mask unless Mask is 0,
// equals none of Values.
type NoneOf struct {
	Arg    int
	Mask   uint32
	Values []uint32
}

func (m NoneOf) String() string {
	return fmt.Sprintf("%s not in %s", argString(m.Arg, m.Mask), hexList(m.Values))
}

// All matches when every one of its matchers does.
type All []Matcher

func (m All) String() string { return joinMatchers(m, " && ") }

// Any matches when at least one of its matchers does.
type Any []Matcher

func (m Any) String() string { return joinMatchers(m, " || ") }

// joinMatchers is ms's strings joined with op, in parentheses.
func joinMatchers(ms []Matcher, op string) string {
	s := make([]string, len(ms))
	for i, x := range ms {
		s[i] = x.String()
	}
	return "(" + strings.Join(s, op) + ")"
}

func argString(arg int, mask uint32) string {
	if mask == 0 {
		return fmt.Sprintf("arg%d", arg)
	}
	return fmt.Sprintf("arg%d&%#x", arg, mask)
}

func hexList(vs []uint32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%#x", v)
	}
	return "{" + strings.Join(s, ",") + "}"
}

// Rule gives the action for one syscall. When Match is nil the action
// applies to every call; otherwise it applies when Match matches and the
// call is allowed when it does not.
type Rule struct {
	Syscall string
	Match   Matcher
	Action  Action
	// Why is a short reason, shown by diagnostics.
	Why string
	// Legacy marks a syscall that only some architectures have (the old
	// non-*at forms such as open and chmod exist on amd64, not arm64):
	// the rule is skipped where the table has no number for it. Other
	// rules without a number are an error, so a typo cannot drop one.
	Legacy bool
}

func (r Rule) String() string {
	if r.Match == nil {
		return fmt.Sprintf("%s: %v", r.Syscall, r.Action)
	}
	return fmt.Sprintf("%s if %v: %v", r.Syscall, r.Match, r.Action)
}

// Argument values, from the Linux UAPI headers (identical on amd64 and
// arm64).
const (
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000
	cloneNewTime   = 0x00000080

	tiocsti   = 0x5412
	tioclinux = 0x541C

	setidBits = 0o6000     // S_ISUID | S_ISGID
	oCreat    = 0o100      // O_CREAT (amd64 and arm64 alike)
	oTmpfile  = 0o20000000 // __O_TMPFILE

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
)

// cloneNamespaces are the namespace flags clone(2) understands. Creating
// a user namespace is the real danger (it hands the caller a full set of
// capabilities over fresh namespaces, the usual first step of kernel
// exploits and of "unshare -Urm" remounting the sandbox away). The other
// namespace flags need CAP_SYS_ADMIN, which the sandbox never has, so
// denying them costs nothing and keeps the kernel's namespace code out of
// reach even if a capability leaks. CLONE_NEWTIME is absent because in
// clone(2) bit 0x80 belongs to the exit-signal byte.
const cloneNamespaces = cloneNewNS | cloneNewCgroup | cloneNewUTS | cloneNewIPC |
	cloneNewUser | cloneNewPID | cloneNewNet

// unshareNamespaces adds CLONE_NEWTIME, which unshare(2) does accept.
const unshareNamespaces = cloneNamespaces | cloneNewTime

// baseRules are denied in every sandbox.
var baseRules = []Rule{
	{Syscall: "ptrace", Action: ActEPERM, Why: "inspect or modify other processes"},
	{Syscall: "process_vm_readv", Action: ActEPERM, Why: "read other processes' memory"},
	{Syscall: "process_vm_writev", Action: ActEPERM, Why: "write other processes' memory"},
	{Syscall: "io_uring_setup", Action: ActEPERM, Why: "io_uring runs operations (socket, openat) that this filter never sees"},
	{Syscall: "io_uring_enter", Action: ActEPERM, Why: "io_uring"},
	{Syscall: "io_uring_register", Action: ActEPERM, Why: "io_uring"},
	{Syscall: "bpf", Action: ActEPERM, Why: "kernel attack surface"},
	{Syscall: "perf_event_open", Action: ActEPERM, Why: "kernel attack surface and side channels"},
	{Syscall: "userfaultfd", Action: ActEPERM, Why: "widens kernel race windows for exploits"},
	{Syscall: "keyctl", Action: ActEPERM, Why: "kernel keyrings are shared outside the sandbox"},
	{Syscall: "add_key", Action: ActEPERM, Why: "kernel keyrings"},
	{Syscall: "request_key", Action: ActEPERM, Why: "kernel keyrings"},
	{Syscall: "kexec_load", Action: ActEPERM, Why: "replace the kernel"},
	{Syscall: "kexec_file_load", Action: ActEPERM, Why: "replace the kernel"},
	{Syscall: "init_module", Action: ActEPERM, Why: "load kernel modules"},
	{Syscall: "finit_module", Action: ActEPERM, Why: "load kernel modules"},
	{Syscall: "delete_module", Action: ActEPERM, Why: "unload kernel modules"},
	{Syscall: "mount", Action: ActEPERM, Why: "change the sandbox's mounts"},
	{Syscall: "umount2", Action: ActEPERM, Why: "uncover paths hidden by the sandbox's mounts"},
	{Syscall: "pivot_root", Action: ActEPERM, Why: "change the root"},
	{Syscall: "move_mount", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "open_tree", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "open_tree_attr", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "fsopen", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "fsmount", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "fsconfig", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "fspick", Action: ActEPERM, Why: "new mount API"},
	{Syscall: "mount_setattr", Action: ActEPERM, Why: "make read-only mounts writable"},
	{Syscall: "setns", Action: ActEPERM, Why: "join namespaces outside the sandbox"},
	{Syscall: "open_by_handle_at", Action: ActEPERM, Why: "open files by handle, bypassing path-based confinement"},
	{Syscall: "acct", Action: ActEPERM, Why: "host-wide process accounting"},
	{Syscall: "swapon", Action: ActEPERM, Why: "host-wide swap"},
	{Syscall: "swapoff", Action: ActEPERM, Why: "host-wide swap"},
	{Syscall: "reboot", Action: ActEPERM, Why: "host-wide"},
	{Syscall: "unshare", Match: AnyBitSet{Arg: 0, Bits: unshareNamespaces}, Action: ActEPERM,
		Why: "no nested namespaces (user namespaces above all)"},
	{Syscall: "clone", Match: AnyBitSet{Arg: 0, Bits: cloneNamespaces}, Action: ActEPERM,
		Why: "no nested namespaces (user namespaces above all)"},
	// clone3 passes its flags in a struct in memory, which BPF cannot
	// read. ENOSYS makes glibc, musl and Go fall back to clone, whose
	// flags the rule above inspects.
	{Syscall: "clone3", Action: ActENOSYS, Why: "flags are out of the filter's reach; libc falls back to clone"},
	{Syscall: "ioctl", Match: OneOf{Arg: 1, Values: []uint32{tiocsti, tioclinux}}, Action: ActEPERM,
		Why: "TIOCSTI/TIOCLINUX inject input into a terminal outside the sandbox"},
	// prlimit64 on another process needs only the same uid, and no LSM
	// scopes it: without a pid namespace the command would cap the open
	// files or address space of agentbox and its reaper (which then
	// cannot sweep, so what the command started outlives the run) or of
	// any other process of the user. libc's setrlimit and getrlimit pass
	// pid 0; the pid is a pid_t, so its low word is all of it.
	{Syscall: "prlimit64", Match: NoneOf{Arg: 0, Values: []uint32{0}}, Action: ActEPERM,
		Why: "change or read the resource limits of another process"},
}

// setidRules keep the command from leaving a set-user-ID or set-group-ID
// file behind: once the run is over, any local user who can reach the
// workspace would run it as the command's user (as root, for a root run).
// Inside the sandbox no_new_privs makes the bits inert anyway. A setgid
// directory is refused too; BPF cannot tell it from a file. openat2 takes
// its mode in a struct out of BPF's reach: ENOSYS makes callers fall back
// to openat.
var setidRules = []Rule{
	{Syscall: "chmod", Match: AnyBitSet{Arg: 1, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox", Legacy: true},
	{Syscall: "fchmod", Match: AnyBitSet{Arg: 1, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox"},
	{Syscall: "fchmodat", Match: AnyBitSet{Arg: 2, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox"},
	{Syscall: "fchmodat2", Match: AnyBitSet{Arg: 2, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox"},
	{Syscall: "open", Match: All{AnyBitSet{Arg: 1, Bits: oCreat | oTmpfile}, AnyBitSet{Arg: 2, Bits: setidBits}}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox", Legacy: true},
	{Syscall: "openat", Match: All{AnyBitSet{Arg: 2, Bits: oCreat | oTmpfile}, AnyBitSet{Arg: 3, Bits: setidBits}}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox"},
	{Syscall: "creat", Match: AnyBitSet{Arg: 1, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox", Legacy: true},
	{Syscall: "mknod", Match: AnyBitSet{Arg: 1, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox", Legacy: true},
	{Syscall: "mknodat", Match: AnyBitSet{Arg: 2, Bits: setidBits}, Action: ActEPERM, Why: "setuid/setgid files outlive the sandbox"},
	{Syscall: "openat2", Action: ActENOSYS, Why: "its mode is out of the filter's reach; callers fall back to openat"},
}

// inetRules confine sockets to AF_UNIX. socketpair is included although
// only AF_UNIX implements it today, so that a future family gains nothing.
var inetRules = []Rule{
	{Syscall: "socket", Match: NoneOf{Arg: 0, Values: []uint32{afUnix}}, Action: ActEPERM,
		Why: "network is off and no network namespace is available"},
	{Syscall: "socketpair", Match: NoneOf{Arg: 0, Values: []uint32{afUnix}}, Action: ActEPERM,
		Why: "network is off and no network namespace is available"},
}

// familyRules keep socket and socketpair to the families a network
// namespace isolates (and AF_UNIX, which connect mediation and the
// namespace's abstract socket table cover). Everything else is refused:
// AF_VSOCK reaches the hypervisor and its other guests whatever the
// network namespace, and AF_PACKET, AF_BLUETOOTH, AF_ALG, AF_XDP, AF_RDS
// and the like are kernel attack surface or hardware that an offline
// command has no business with.
var familyRules = []Rule{
	{Syscall: "socket", Match: NoneOf{Arg: 0, Values: []uint32{afUnix, afInet, afInet6, afNetlink}}, Action: ActEPERM,
		Why: "network is off: only unix, inet, inet6 and netlink sockets, which the network namespace isolates"},
	{Syscall: "socketpair", Match: NoneOf{Arg: 0, Values: []uint32{afUnix, afInet, afInet6, afNetlink}}, Action: ActEPERM,
		Why: "network is off: only unix, inet, inet6 and netlink sockets, which the network namespace isolates"},
}

// Values for tcpOnlyRules.
const (
	sockStream   = 1
	sockTypeMask = 0xf
	ipprotoTCP   = 6
	msgFastOpen  = 0x20000000
)

// tcpOnlyRules confine sockets to AF_UNIX and TCP for allow-listed egress
// without a network namespace: connect mediation decides every TCP
// destination, so nothing may leave without connect(2). UDP, SCTP, MPTCP
// and raw sockets are refused (sendto names a destination per datagram),
// and so are TCP Fast Open sends, which connect from inside sendto and
// sendmsg. listen(2) is refused because an unbound socket that listens is
// bound to an ephemeral port on every address, reachable from other
// machines; seccomp cannot tell a unix socket's listen from a TCP one's.
var tcpOnlyRules = []Rule{
	{Syscall: "socket", Match: Any{
		NoneOf{Arg: 0, Values: []uint32{afUnix, afInet, afInet6}},
		All{
			OneOf{Arg: 0, Values: []uint32{afInet, afInet6}},
			Any{
				NoneOf{Arg: 1, Mask: sockTypeMask, Values: []uint32{sockStream}},
				NoneOf{Arg: 2, Values: []uint32{0, ipprotoTCP}},
			},
		},
	}, Action: ActEPERM, Why: "allow-listed egress without a network namespace: only unix sockets and TCP, whose connects are checked"},
	{Syscall: "socketpair", Match: NoneOf{Arg: 0, Values: []uint32{afUnix}}, Action: ActEPERM,
		Why: "allow-listed egress without a network namespace"},
	{Syscall: "sendto", Match: AnyBitSet{Arg: 3, Bits: msgFastOpen}, Action: ActEPERM,
		Why: "TCP Fast Open connects without connect(2)"},
	{Syscall: "sendmsg", Match: AnyBitSet{Arg: 2, Bits: msgFastOpen}, Action: ActEPERM,
		Why: "TCP Fast Open connects without connect(2)"},
	{Syscall: "sendmmsg", Match: AnyBitSet{Arg: 3, Bits: msgFastOpen}, Action: ActEPERM,
		Why: "TCP Fast Open connects without connect(2)"},
	{Syscall: "listen", Action: ActEPERM,
		Why: "a listening socket without a network namespace is reachable from other machines"},
}

// ipcRules take away System V IPC and POSIX message queues: without an
// IPC namespace they are the host's, named by keys and names that no
// filesystem wall sees. (POSIX shared memory and semaphores are files in
// /dev/shm, which Landlock covers.) mq_timedsend and friends are denied
// too: an mqueue file opened read-only through a mounted /dev/mqueue
// would otherwise still receive the host's messages.
var ipcRules = []Rule{
	{Syscall: "shmget", Action: ActEPERM, Why: "no IPC namespace: SysV shared memory is the host's"},
	{Syscall: "shmat", Action: ActEPERM, Why: "no IPC namespace: SysV shared memory is the host's"},
	{Syscall: "shmctl", Action: ActEPERM, Why: "no IPC namespace: SysV shared memory is the host's"},
	{Syscall: "shmdt", Action: ActEPERM, Why: "no IPC namespace: SysV shared memory is the host's"},
	{Syscall: "msgget", Action: ActEPERM, Why: "no IPC namespace: SysV message queues are the host's"},
	{Syscall: "msgsnd", Action: ActEPERM, Why: "no IPC namespace: SysV message queues are the host's"},
	{Syscall: "msgrcv", Action: ActEPERM, Why: "no IPC namespace: SysV message queues are the host's"},
	{Syscall: "msgctl", Action: ActEPERM, Why: "no IPC namespace: SysV message queues are the host's"},
	{Syscall: "semget", Action: ActEPERM, Why: "no IPC namespace: SysV semaphores are the host's"},
	{Syscall: "semop", Action: ActEPERM, Why: "no IPC namespace: SysV semaphores are the host's"},
	{Syscall: "semtimedop", Action: ActEPERM, Why: "no IPC namespace: SysV semaphores are the host's"},
	{Syscall: "semctl", Action: ActEPERM, Why: "no IPC namespace: SysV semaphores are the host's"},
	{Syscall: "mq_open", Action: ActEPERM, Why: "no IPC namespace: POSIX message queues are the host's"},
	{Syscall: "mq_unlink", Action: ActEPERM, Why: "no IPC namespace: POSIX message queues are the host's"},
	{Syscall: "mq_timedsend", Action: ActEPERM, Why: "no IPC namespace: POSIX message queues are the host's"},
	{Syscall: "mq_timedreceive", Action: ActEPERM, Why: "no IPC namespace: POSIX message queues are the host's"},
	{Syscall: "mq_notify", Action: ActEPERM, Why: "no IPC namespace: POSIX message queues are the host's"},
	{Syscall: "mq_getsetattr", Action: ActEPERM, Why: "no IPC namespace: POSIX message queues are the host's"},
}

// Rules returns the rule table for opts. BuildProgram sorts the rules by
// syscall number, so their order here does not matter. The slice is fresh;
// callers may modify it.
func Rules(opts Options) []Rule {
	rules := append(append([]Rule(nil), baseRules...), setidRules...)
	switch {
	case opts.TCPOnly:
		rules = append(rules, tcpOnlyRules...)
	case opts.DenyInetSockets:
		// Stricter than RestrictSocketFamilies, which it includes.
		rules = append(rules, inetRules...)
	case opts.RestrictSocketFamilies:
		rules = append(rules, familyRules...)
	}
	if opts.DenyIPC {
		rules = append(rules, ipcRules...)
	}
	if opts.AllowNewPID {
		for i, r := range rules {
			if r.Syscall == "clone" {
				rules[i].Match = AnyBitSet{Arg: 0, Bits: cloneNamespaces &^ (cloneNewPID | cloneNewIPC)}
			}
		}
	}
	return rules
}
