// Package seccomp builds and installs the seccomp-BPF filter that the
// Linux sandbox applies right before it executes the command.
//
// The rules are data ([Rules]); [BuildProgram] is a pure function from
// [Options] to a classic BPF program, for amd64 or arm64 on any host, so
// both programs are tested in a BPF interpreter everywhere. Only
// [Install] touches the kernel, and only on Linux.
//
// # The program
//
//  1. A seccomp_data.arch other than the one the program was built for
//     (i386 via int 0x80 on x86_64, AArch32 on arm64) is denied, because
//     syscall numbers mean different things there.
//  2. On x86_64, numbers carrying the x32 bit are denied.
//  3. A binary search on the syscall number finds its rule; argument
//     matchers decide rules that depend on arguments.
//  4. Everything else is allowed.
//
// Denials return EPERM (ENOSYS for clone3) instead of killing the
// process, so commands fail the way they would for an unprivileged user.
//
// # Limitations
//
// The filter is a deny list aimed at kernel attack surface and sandbox
// escapes; file and network confinement come from namespaces and
// Landlock. Arguments passed through memory (clone3's struct, socket
// addresses) are out of reach of BPF.
package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/net/bpf"
)

// Options select the filter.
type Options struct {
	// Arch is the GOARCH the program is for: "amd64" or "arm64".
	Arch string
	// DenyInetSockets limits socket and socketpair to AF_UNIX. It is
	// meant for runs with the network off and no network namespace;
	// inside a network namespace loopback should keep working. It
	// implies RestrictSocketFamilies.
	DenyInetSockets bool
	// RestrictSocketFamilies limits socket and socketpair to AF_UNIX,
	// AF_INET, AF_INET6 and AF_NETLINK, the families a network namespace
	// isolates. It is meant for runs with the network off inside a
	// network namespace: AF_VSOCK, for one, is not isolated by network
	// namespaces and reaches the hypervisor.
	RestrictSocketFamilies bool
	// TCPOnly limits sockets to AF_UNIX and TCP over AF_INET and
	// AF_INET6, and refuses TCP Fast Open sends and listen(2). It is
	// meant for allow-listed egress without a network namespace, where
	// a connect supervisor checks every TCP destination; it takes
	// precedence over DenyInetSockets and RestrictSocketFamilies.
	TCPOnly bool
	// DenyIPC refuses System V IPC (shm*, msg*, sem*) and POSIX message
	// queues (mq_*). It is meant for runs without an IPC namespace, where
	// those objects are the host's.
	DenyIPC bool
	// AllowNewPID lets clone(2) create a pid and an IPC namespace. A
	// session's zygote forks every command into fresh ones from a thread
	// that already carries this filter, so the filter must let those two
	// flags through. The command inherits the allowance, which is
	// harmless: both need CAP_SYS_ADMIN, which it never holds, and every
	// other namespace flag (CLONE_NEWUSER above all) and unshare(2) stay
	// refused.
	AllowNewPID bool
}

// Offsets in struct seccomp_data (include/uapi/linux/seccomp.h):
//
//	int   nr;                  // 0
//	__u32 arch;                // 4
//	__u64 instruction_pointer; // 8
//	__u64 args[6];             // 16
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// argLow is the offset of the low 32 bits of argument i. Both supported
// architectures are little-endian, so the low word comes first.
func argLow(i int) uint32 { return offArgs + 8*uint32(i) }

// maxInstructions is BPF_MAXINSNS, the kernel's limit per filter.
const maxInstructions = 4096

// Labels shared by all rules.
const (
	lblAllow  = "allow"
	lblEPERM  = "eperm"
	lblENOSYS = "enosys"
	lblNotify = "notify"
)

// ErrUnsupportedArch is returned for an architecture without a syscall
// table here.
var ErrUnsupportedArch = errors.New("seccomp: unsupported architecture")

// BuildProgram returns the filter for opts. It is a pure function: the
// result depends on opts only, not on the machine it runs on.
func BuildProgram(opts Options) ([]bpf.RawInstruction, error) {
	return Build(opts.Arch, Rules(opts))
}

// Build returns the program for a rule table on archName ("amd64" or
// "arm64"): the architecture check of the package documentation, then the
// rules, with every syscall that has no rule allowed. Other filters of the
// sandbox (the unix-socket notifier) are built from their own tables with
// it, so there is one assembler and one syscall table.
func Build(archName string, rules []Rule) ([]bpf.RawInstruction, error) {
	arch, ok := arches[archName]
	if !ok {
		return nil, fmt.Errorf("%w %q (have amd64, arm64)", ErrUnsupportedArch, archName)
	}

	type resolved struct {
		Rule
		nr uint32
	}
	rs := make([]resolved, 0, len(rules))
	seen := make(map[string]bool)
	for _, r := range rules {
		nr, ok := arch.nr[r.Syscall]
		if !ok && r.Legacy {
			continue // this architecture has only the *at form
		}
		if !ok {
			return nil, fmt.Errorf("seccomp: no %s syscall number for %q", archName, r.Syscall)
		}
		// Two rules for one syscall would silently shadow each other.
		if seen[r.Syscall] {
			return nil, fmt.Errorf("seccomp: more than one rule for %q", r.Syscall)
		}
		seen[r.Syscall] = true
		rs = append(rs, resolved{r, nr})
	}
	// Sorted by number so the program is deterministic and easy to read
	// in a disassembly.
	slices.SortFunc(rs, func(a, b resolved) int { return int(a.nr) - int(b.nr) })

	a := newAssembler()
	a.loadWord(offArch)
	a.jumpIf(bpf.JumpEqual, arch.auditArch, "", lblEPERM)
	a.loadWord(offNr)
	if arch.hasX32 {
		a.jumpIf(bpf.JumpBitsSet, x32SyscallBit, lblEPERM, "")
	}
	// A binary search rather than one comparison per rule: the kernel
	// runs the program for every syscall number when the filter is
	// installed (to cache the numbers it always allows) and for every
	// syscall the command makes whose number is not cached, and a search
	// takes a few comparisons where the chain took one per rule for
	// every number without a rule (most of them). A session installs a
	// filter for each command.
	var search func(lo, hi int)
	search = func(lo, hi int) {
		if hi-lo <= 4 {
			for i := lo; i < hi; i++ {
				target := fmt.Sprintf("rule%d", i)
				if rs[i].Match == nil {
					target = actionLabel(rs[i].Action)
				}
				a.jumpIf(bpf.JumpEqual, rs[i].nr, target, "")
			}
			// Default action for syscalls without a rule.
			a.jump(lblAllow)
			return
		}
		mid := (lo + hi) / 2
		upper := a.uniqueLabel("nr")
		a.jumpIf(bpf.JumpGreaterOrEqual, rs[mid].nr, upper, "")
		search(lo, mid)
		a.label(upper)
		search(mid, hi)
	}
	search(0, len(rs))
	for i, r := range rs {
		if r.Match == nil {
			continue
		}
		a.label(fmt.Sprintf("rule%d", i))
		r.Match.emit(a, actionLabel(r.Action), lblAllow)
	}
	// The shared returns come last because classic BPF only jumps
	// forward.
	a.label(lblAllow)
	a.ret(ActAllow)
	a.label(lblEPERM)
	a.ret(ActEPERM)
	a.label(lblENOSYS)
	a.ret(ActENOSYS)
	if slices.ContainsFunc(rs, func(r resolved) bool { return r.Action == ActNotify }) {
		a.label(lblNotify)
		a.ret(ActNotify)
	}
	prog, err := a.assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling %s program: %w", archName, err)
	}
	if len(prog) > maxInstructions {
		return nil, fmt.Errorf("seccomp: program has %d instructions, kernel limit is %d", len(prog), maxInstructions)
	}
	return prog, nil
}

// BuildNativeProgram is [BuildProgram] for the architecture this binary
// was compiled for. opts.Arch must be empty or equal to runtime.GOARCH.
func BuildNativeProgram(opts Options) ([]bpf.RawInstruction, error) {
	if opts.Arch != "" && opts.Arch != runtime.GOARCH {
		return nil, fmt.Errorf("seccomp: native program requested for %q on %s", opts.Arch, runtime.GOARCH)
	}
	opts.Arch = runtime.GOARCH
	return BuildProgram(opts)
}

// actionLabel maps an action to the shared return instruction for it.
// Only the actions the rule table uses have one; anything else is a bug
// in the table, caught by the "undefined label" check at assembly.
func actionLabel(act Action) string {
	switch act {
	case ActAllow:
		return lblAllow
	case ActEPERM:
		return lblEPERM
	case ActENOSYS:
		return lblENOSYS
	case ActNotify:
		return lblNotify
	}
	return fmt.Sprintf("unsupported-action-%#x", uint32(act))
}

func (m AnyBitSet) emit(a *assembler, match, nomatch string) {
	a.loadWord(argLow(m.Arg))
	a.jumpIf(bpf.JumpBitsSet, m.Bits, match, nomatch)
}

// loadArg loads the low word of argument arg, ANDed with mask unless it is 0.
func loadArg(a *assembler, arg int, mask uint32) {
	a.loadWord(argLow(arg))
	if mask != 0 {
		a.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mask})
	}
}

func (m OneOf) emit(a *assembler, match, nomatch string) {
	loadArg(a, m.Arg, m.Mask)
	for _, v := range m.Values {
		a.jumpIf(bpf.JumpEqual, v, match, "")
	}
	a.jump(nomatch)
}

func (m NoneOf) emit(a *assembler, match, nomatch string) {
	loadArg(a, m.Arg, m.Mask)
	for _, v := range m.Values {
		a.jumpIf(bpf.JumpEqual, v, nomatch, "")
	}
	a.jump(match)
}

func (m Any) emit(a *assembler, match, nomatch string) {
	if len(m) == 0 {
		a.jump(nomatch)
		return
	}
	for _, x := range m[:len(m)-1] {
		next := a.uniqueLabel("any")
		x.emit(a, match, next)
		a.label(next)
	}
	m[len(m)-1].emit(a, match, nomatch)
}

func (m All) emit(a *assembler, match, nomatch string) {
	if len(m) == 0 {
		a.jump(match)
		return
	}
	for _, x := range m[:len(m)-1] {
		next := a.uniqueLabel("all")
		x.emit(a, next, nomatch)
		a.label(next)
	}
	m[len(m)-1].emit(a, match, nomatch)
}

// Install loads prog into the kernel for the calling process.
//
// It sets PR_SET_NO_NEW_PRIVS first (the kernel refuses an unprivileged
// filter without it), then installs the filter with
// SECCOMP_FILTER_FLAG_TSYNC so that every thread of the process is
// filtered. On kernels without the seccomp(2) syscall (before 3.17) it
// falls back to prctl(PR_SET_SECCOMP), which filters the calling thread
// only.
//
// Callers must hold [runtime.LockOSThread] from before Install until the
// command starts (syscall.Exec, or a fork from that same thread):
// no_new_privs is per thread, and in the prctl fallback the filter is
// too. With TSYNC every thread carries both, and threads created later
// inherit them. The filter is inherited across execve and cannot be
// removed, so Install belongs at the very end of the sandbox's init
// stage, after mounts, capability dropping and Landlock (which need
// syscalls this filter denies, such as mount).
//
// Errors are [*os.SyscallError] values naming the failing call. On other
// operating systems Install returns an error wrapping
// [errors.ErrUnsupported].
func Install(prog []bpf.RawInstruction) error {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return fmt.Errorf("seccomp: program length %d outside 1..%d", len(prog), maxInstructions)
	}
	return install(prog)
}

// InstallListener loads prog onto the calling thread only (no TSYNC), with
// SECCOMP_FILTER_FLAG_NEW_LISTENER, and returns the listener's
// close-on-exec fd, on which [ActNotify] calls arrive (seccomp_unotify(2)).
// It sets no_new_privs on the thread first. The caller must hold
// [runtime.LockOSThread] for as long as processes forked from the thread
// should carry the filter, and must install a TSYNC filter (see [Install])
// before, not after: TSYNC would copy this thread's filters to every
// thread.
func InstallListener(prog []bpf.RawInstruction) (int, error) {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return -1, fmt.Errorf("seccomp: program length %d outside 1..%d", len(prog), maxInstructions)
	}
	return installListener(prog)
}
