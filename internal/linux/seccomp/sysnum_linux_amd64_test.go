package seccomp

import "golang.org/x/sys/unix"

// archOnlyNumbers are the syscalls that only amd64 has (the generic table
// of arm64 dropped the path-based forms in favour of the *at ones).
var archOnlyNumbers = map[string]uintptr{
	"chmod": unix.SYS_CHMOD, "chown": unix.SYS_CHOWN, "lchown": unix.SYS_LCHOWN,
	"utime": unix.SYS_UTIME, "utimes": unix.SYS_UTIMES, "futimesat": unix.SYS_FUTIMESAT,
	"open": unix.SYS_OPEN, "creat": unix.SYS_CREAT, "mknod": unix.SYS_MKNOD,
	"mkdir": unix.SYS_MKDIR, "rmdir": unix.SYS_RMDIR, "unlink": unix.SYS_UNLINK, "rename": unix.SYS_RENAME,
	"link": unix.SYS_LINK, "symlink": unix.SYS_SYMLINK,
}
