package seccomp

// Audit architecture tokens as found in seccomp_data.arch
// (include/uapi/linux/audit.h). Only 64-bit little-endian ABIs are
// supported; the foreign tokens are listed so tests can feed them in.
const (
	auditArchX86_64  = 0xC000003E // AUDIT_ARCH_X86_64
	auditArchAArch64 = 0xC00000B7 // AUDIT_ARCH_AARCH64
	auditArchI386    = 0x40000003 // AUDIT_ARCH_I386: int 0x80 on x86_64
	auditArchARM     = 0x40000028 // AUDIT_ARCH_ARM: AArch32 compat tasks
)

// x32SyscallBit marks the x32 ABI on x86_64: the same syscall numbers
// with this bit set reach the kernel through a second table, so a filter
// that only compares numbers would let them through.
const x32SyscallBit = 0x40000000

// archInfo is everything BuildProgram needs to know about one
// architecture. The syscall numbers are data rather than x/sys/unix
// constants on purpose: unix.SYS_* is only defined for the GOARCH being
// compiled, and the arm64 program must be buildable and testable on an
// amd64 machine (and vice versa). TestSyscallNumbersMatchHost compares the
// running architecture's table against x/sys/unix.
type archInfo struct {
	auditArch uint32
	hasX32    bool
	nr        map[string]uint32
}

var arches = map[string]*archInfo{
	"amd64": {
		auditArch: auditArchX86_64,
		hasX32:    true,
		// arch/x86/entry/syscalls/syscall_64.tbl
		nr: map[string]uint32{
			"ioctl":             16,
			"shmget":            29,
			"shmat":             30,
			"shmctl":            31,
			"connect":           42,
			"sendto":            44,
			"sendmsg":           46,
			"listen":            50,
			"sendmmsg":          307,
			"socket":            41,
			"socketpair":        53,
			"clone":             56,
			"semget":            64,
			"semop":             65,
			"semctl":            66,
			"shmdt":             67,
			"msgget":            68,
			"msgsnd":            69,
			"msgrcv":            70,
			"msgctl":            71,
			"ptrace":            101,
			"pivot_root":        155,
			"acct":              163,
			"mount":             165,
			"umount2":           166,
			"swapon":            167,
			"swapoff":           168,
			"reboot":            169,
			"init_module":       175,
			"delete_module":     176,
			"semtimedop":        220,
			"mq_open":           240,
			"mq_unlink":         241,
			"mq_timedsend":      242,
			"mq_timedreceive":   243,
			"mq_notify":         244,
			"mq_getsetattr":     245,
			"kexec_load":        246,
			"add_key":           248,
			"request_key":       249,
			"keyctl":            250,
			"unshare":           272,
			"perf_event_open":   298,
			"open_by_handle_at": 304,
			"setns":             308,
			"process_vm_readv":  310,
			"process_vm_writev": 311,
			"finit_module":      313,
			"kexec_file_load":   320,
			"bpf":               321,
			"userfaultfd":       323,
			"io_uring_setup":    425,
			"io_uring_enter":    426,
			"io_uring_register": 427,
			"open_tree":         428,
			"move_mount":        429,
			"fsopen":            430,
			"fsconfig":          431,
			"fsmount":           432,
			"fspick":            433,
			"clone3":            435,
			"mount_setattr":     442,
			"open_tree_attr":    467,
			"chmod":             90,
			"fchmod":            91,
			"chown":             92,
			"fchown":            93,
			"lchown":            94,
			"utime":             132,
			"setxattr":          188,
			"lsetxattr":         189,
			"fsetxattr":         190,
			"removexattr":       197,
			"lremovexattr":      198,
			"fremovexattr":      199,
			"utimes":            235,
			"fchownat":          260,
			"futimesat":         261,
			"fchmodat":          268,
			"utimensat":         280,
			"fchmodat2":         452,
			"open":              2,
			"creat":             85,
			"mknod":             133,
			"openat":            257,
			"mknodat":           259,
			"openat2":           437,
			"setxattrat":        463,
			"removexattrat":     466,
			"file_setattr":      469,
			"prlimit64":         302,
			"truncate":          76,
			"rename":            82,
			"mkdir":             83,
			"rmdir":             84,
			"link":              86,
			"unlink":            87,
			"symlink":           88,
			"mkdirat":           258,
			"unlinkat":          263,
			"renameat":          264,
			"linkat":            265,
			"symlinkat":         266,
			"renameat2":         316,
		},
	},
	"arm64": {
		auditArch: auditArchAArch64,
		// include/uapi/asm-generic/unistd.h
		nr: map[string]uint32{
			"ioctl":             29,
			"umount2":           39,
			"mount":             40,
			"pivot_root":        41,
			"acct":              89,
			"unshare":           97,
			"kexec_load":        104,
			"init_module":       105,
			"delete_module":     106,
			"ptrace":            117,
			"reboot":            142,
			"mq_open":           180,
			"mq_unlink":         181,
			"mq_timedsend":      182,
			"mq_timedreceive":   183,
			"mq_notify":         184,
			"mq_getsetattr":     185,
			"msgget":            186,
			"msgctl":            187,
			"msgrcv":            188,
			"msgsnd":            189,
			"semget":            190,
			"semctl":            191,
			"semtimedop":        192,
			"semop":             193,
			"shmget":            194,
			"shmctl":            195,
			"shmat":             196,
			"shmdt":             197,
			"connect":           203,
			"listen":            201,
			"sendto":            206,
			"sendmsg":           211,
			"sendmmsg":          269,
			"socket":            198,
			"socketpair":        199,
			"add_key":           217,
			"request_key":       218,
			"keyctl":            219,
			"clone":             220,
			"swapon":            224,
			"swapoff":           225,
			"perf_event_open":   241,
			"open_by_handle_at": 265,
			"setns":             268,
			"process_vm_readv":  270,
			"process_vm_writev": 271,
			"finit_module":      273,
			"bpf":               280,
			"userfaultfd":       282,
			"kexec_file_load":   294,
			"io_uring_setup":    425,
			"io_uring_enter":    426,
			"io_uring_register": 427,
			"open_tree":         428,
			"move_mount":        429,
			"fsopen":            430,
			"fsconfig":          431,
			"fsmount":           432,
			"fspick":            433,
			"clone3":            435,
			"mount_setattr":     442,
			"open_tree_attr":    467,
			"setxattr":          5,
			"lsetxattr":         6,
			"fsetxattr":         7,
			"removexattr":       14,
			"lremovexattr":      15,
			"fremovexattr":      16,
			"fchmod":            52,
			"fchmodat":          53,
			"fchownat":          54,
			"fchown":            55,
			"utimensat":         88,
			"fchmodat2":         452,
			"openat":            56,
			"mknodat":           33,
			"openat2":           437,
			"setxattrat":        463,
			"removexattrat":     466,
			"file_setattr":      469,
			"prlimit64":         261,
			"mkdirat":           34,
			"unlinkat":          35,
			"symlinkat":         36,
			"linkat":            37,
			"renameat":          38,
			"truncate":          45,
			"renameat2":         276,
		},
	},
}

// AuditArch returns the AUDIT_ARCH_* value the program for archName
// checks, for tests that build seccomp_data inputs.
func AuditArch(archName string) (uint32, bool) {
	a, ok := arches[archName]
	if !ok {
		return 0, false
	}
	return a.auditArch, true
}

// Number returns the number of syscall on archName.
func Number(archName, syscall string) (uint32, bool) {
	a, ok := arches[archName]
	if !ok {
		return 0, false
	}
	nr, ok := a.nr[syscall]
	return nr, ok
}
