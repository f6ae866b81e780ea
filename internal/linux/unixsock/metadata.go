package unixsock

import (
	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// Metadata mediation, for sandboxes without a mount namespace (degraded
// mode). Landlock has no access right for a file's metadata: chmod, chown,
// utimes and the xattr calls succeed on any file the command's uid owns,
// writable root or not (the user's ~/.bashrc made 0666 or setuid, its
// times forged, an xattr planted). With [Options].Metadata set, the
// notification filter also hands these calls to the supervisor, which
// resolves the file in the target's context (its cwd, its descriptors),
// asks the policy about the real path of the inode it now holds, and
// performs the change itself on that descriptor: what was checked is what
// is changed, whatever the target does to its memory or the path
// meanwhile.
//
// The calls whose arguments the supervisor cannot rebuild safely are
// refused: setxattrat and removexattrat (Linux 6.13) and file_setattr
// (6.17) with ENOSYS, so that libcs fall back to the classic calls; the
// inode-flag ioctls (chattr's FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR,
// FS_IOC_SETVERSION) with EPERM.

type metaOp uint8

const (
	opChmod metaOp = iota + 1
	opChown
	opUtimes
	opSetxattr
	opRemovexattr
)

// timesKind is the layout of a times argument.
type timesKind uint8

const (
	timesUtimbuf  timesKind = iota + 1 // struct utimbuf: two time_t
	timesTimeval                       // struct timeval[2]
	timesTimespec                      // struct timespec[2]
)

// metaCall says where one metadata syscall keeps its arguments.
type metaCall struct {
	op metaOp
	// fd is the index of the file descriptor argument: the file itself
	// for the f* calls, the directory of an *at call; -1 when there is
	// none (the path is relative to the cwd).
	fd int
	// path is the index of the path argument; -1 for the f* calls.
	path int
	// nullPathIsFd: a NULL path means the descriptor itself
	// (utimensat, futimesat).
	nullPathIsFd bool
	// flags is the index of an AT_* flags argument, -1 if none.
	flags int
	// nofollow: the call acts on a final symlink itself (lchown, l*xattr).
	nofollow bool
	// arg is the index of the first argument of the change: the mode,
	// the uid (the gid follows), the times pointer, or the xattr name
	// (for setxattr the value, size and flags follow).
	arg   int
	times timesKind
}

// metaCalls are the mediated calls; those a table lacks (chmod, chown,
// lchown, utime, utimes and futimesat on arm64) do not exist there.
var metaCalls = map[string]metaCall{
	"chmod":        {op: opChmod, fd: -1, path: 0, flags: -1, arg: 1},
	"fchmod":       {op: opChmod, fd: 0, path: -1, flags: -1, arg: 1},
	"fchmodat":     {op: opChmod, fd: 0, path: 1, flags: -1, arg: 2},
	"fchmodat2":    {op: opChmod, fd: 0, path: 1, flags: 3, arg: 2},
	"chown":        {op: opChown, fd: -1, path: 0, flags: -1, arg: 1},
	"lchown":       {op: opChown, fd: -1, path: 0, flags: -1, nofollow: true, arg: 1},
	"fchown":       {op: opChown, fd: 0, path: -1, flags: -1, arg: 1},
	"fchownat":     {op: opChown, fd: 0, path: 1, flags: 4, arg: 2},
	"utime":        {op: opUtimes, fd: -1, path: 0, flags: -1, arg: 1, times: timesUtimbuf},
	"utimes":       {op: opUtimes, fd: -1, path: 0, flags: -1, arg: 1, times: timesTimeval},
	"futimesat":    {op: opUtimes, fd: 0, path: 1, nullPathIsFd: true, flags: -1, arg: 2, times: timesTimeval},
	"utimensat":    {op: opUtimes, fd: 0, path: 1, nullPathIsFd: true, flags: 3, arg: 2, times: timesTimespec},
	"setxattr":     {op: opSetxattr, fd: -1, path: 0, flags: -1, arg: 1},
	"lsetxattr":    {op: opSetxattr, fd: -1, path: 0, flags: -1, nofollow: true, arg: 1},
	"fsetxattr":    {op: opSetxattr, fd: 0, path: -1, flags: -1, arg: 1},
	"removexattr":  {op: opRemovexattr, fd: -1, path: 0, flags: -1, arg: 1},
	"lremovexattr": {op: opRemovexattr, fd: -1, path: 0, flags: -1, nofollow: true, arg: 1},
	"fremovexattr": {op: opRemovexattr, fd: 0, path: -1, flags: -1, arg: 1},
}

// Inode-flag ioctls (include/uapi/linux/fs.h), 64-bit and 32-bit forms.
const (
	fsIocSetflags     = 0x40086602
	fsIoc32Setflags   = 0x40046602
	fsIocSetversion   = 0x40087602
	fsIoc32Setversion = 0x40047602
	fsIocFssetxattr   = 0x401c5820
)

// metadataRules are the filter's rules for metadata mediation on arch.
func metadataRules(arch string) []seccomp.Rule {
	var rs []seccomp.Rule
	for name := range metaCalls {
		if _, ok := seccomp.Number(arch, name); ok {
			rs = append(rs, seccomp.Rule{Syscall: name, Action: seccomp.ActNotify, Why: "metadata: decided by the supervisor"})
		}
	}
	for _, name := range []string{"setxattrat", "removexattrat", "file_setattr"} {
		rs = append(rs, seccomp.Rule{Syscall: name, Action: seccomp.ActENOSYS, Why: "metadata: not mediated; libc falls back to the mediated calls"})
	}
	rs = append(rs, seccomp.Rule{Syscall: "ioctl",
		Match:  seccomp.OneOf{Arg: 1, Values: []uint32{fsIocSetflags, fsIoc32Setflags, fsIocSetversion, fsIoc32Setversion, fsIocFssetxattr}},
		Action: seccomp.ActEPERM, Why: "inode flags of files outside the writable roots"})
	return rs
}
