package unixsock

import (
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// File observation, for the run report's "filesystem" section (package
// fsreport). With [Options].Files set, the notification filter also hands
// the supervisor every call that means to change the filesystem: open,
// openat and creat with a write or create flag (tested in the filter, so
// that reads never wake the supervisor; openat2 keeps its flags in
// memory, out of BPF's reach, and always comes), mkdir, mknod, symlink,
// link, unlink, rmdir, rename, truncate and, unless metadata is mediated
// (metadata.go), the metadata calls that name a path (not those on a
// descriptor: fchmod, fchown, futimens, fsetxattr). The supervisor resolves the path in
// the target's context, tells Files, and answers
// SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel then runs the call exactly
// as it would have without the filter, so the observer never allows
// anything, and a race with the target (it changes the path after the
// check) can cost a report line, never a wall. The filter shares the
// connect supervisor's listener because the kernel allows one listener
// per filter chain.
//
// Reads of hidden paths (op "read") would come through the same seam: a
// rule for plain opens and a fileCall with op read; none is installed
// today, since nothing is hidden yet.

// Open flags (identical on amd64 and arm64).
const (
	oWronly  = 0o1
	oRdwr    = 0o2
	oAccmode = 0o3
	oCreat   = 0o100
	oExcl    = 0o200
	oTrunc   = 0o1000
	oNofollw = 0o400000
	oTmpfile = 0o20000000 // __O_TMPFILE
	oPath    = 0o10000000 // O_PATH: open and openat drop every other flag but a few
	// oWriteIntent are the flags that make an open a change.
	oWriteIntent = oWronly | oRdwr | oCreat | oTrunc
)

// fileCall says where one observed syscall keeps its arguments.
type fileCall struct {
	op string
	// flags is the index of open's flags; -1 when the call is no open,
	// -2 for openat2 (flags in struct open_how at argument 2), -3 for
	// creat (O_CREAT|O_WRONLY|O_TRUNC).
	flags int
	// fd and path: the directory descriptor's index (-1: the cwd) and
	// the path's (-1: the f* metadata calls, the descriptor itself).
	fd, path int
	// fd2 and path2: rename's destination; path2 -1 when there is none.
	fd2, path2 int
	// create: the call makes a new name and fails with EEXIST on an
	// existing one (mkdir, mknod, link, symlink), so an existing name
	// is no refusal.
	create bool
	// nofollow: the call acts on a final symlink itself.
	nofollow bool
	// atFlags is the index of an AT_SYMLINK_NOFOLLOW flags argument, -1.
	atFlags int
	// nullPathIsFd: a NULL path means the descriptor (utimensat).
	nullPathIsFd bool
}

const (
	flagsNone    = -1
	flagsOpenat2 = -2
	flagsCreat   = -3
)

// fileCalls are the observed calls other than the metadata ones.
var fileCalls = map[string]fileCall{
	"open":      {op: fsreport.OpWrite, flags: 1, fd: -1, path: 0, path2: -1, atFlags: -1},
	"openat":    {op: fsreport.OpWrite, flags: 2, fd: 0, path: 1, path2: -1, atFlags: -1},
	"openat2":   {op: fsreport.OpWrite, flags: flagsOpenat2, fd: 0, path: 1, path2: -1, atFlags: -1},
	"creat":     {op: fsreport.OpWrite, flags: flagsCreat, fd: -1, path: 0, path2: -1, atFlags: -1},
	"mkdir":     {op: fsreport.OpCreate, flags: flagsNone, fd: -1, path: 0, path2: -1, create: true, nofollow: true, atFlags: -1},
	"mkdirat":   {op: fsreport.OpCreate, flags: flagsNone, fd: 0, path: 1, path2: -1, create: true, nofollow: true, atFlags: -1},
	"mknod":     {op: fsreport.OpCreate, flags: flagsNone, fd: -1, path: 0, path2: -1, create: true, nofollow: true, atFlags: -1},
	"mknodat":   {op: fsreport.OpCreate, flags: flagsNone, fd: 0, path: 1, path2: -1, create: true, nofollow: true, atFlags: -1},
	"symlink":   {op: fsreport.OpLink, flags: flagsNone, fd: -1, path: 1, path2: -1, create: true, nofollow: true, atFlags: -1},
	"symlinkat": {op: fsreport.OpLink, flags: flagsNone, fd: 1, path: 2, path2: -1, create: true, nofollow: true, atFlags: -1},
	"link":      {op: fsreport.OpLink, flags: flagsNone, fd: -1, path: 1, path2: -1, create: true, nofollow: true, atFlags: -1},
	"linkat":    {op: fsreport.OpLink, flags: flagsNone, fd: 2, path: 3, path2: -1, create: true, nofollow: true, atFlags: -1},
	"unlink":    {op: fsreport.OpDelete, flags: flagsNone, fd: -1, path: 0, path2: -1, nofollow: true, atFlags: -1},
	"rmdir":     {op: fsreport.OpDelete, flags: flagsNone, fd: -1, path: 0, path2: -1, nofollow: true, atFlags: -1},
	"unlinkat":  {op: fsreport.OpDelete, flags: flagsNone, fd: 0, path: 1, path2: -1, nofollow: true, atFlags: -1},
	"rename":    {op: fsreport.OpRename, flags: flagsNone, fd: -1, path: 0, fd2: -1, path2: 1, nofollow: true, atFlags: -1},
	"renameat":  {op: fsreport.OpRename, flags: flagsNone, fd: 0, path: 1, fd2: 2, path2: 3, nofollow: true, atFlags: -1},
	"renameat2": {op: fsreport.OpRename, flags: flagsNone, fd: 0, path: 1, fd2: 2, path2: 3, nofollow: true, atFlags: -1},
	"truncate":  {op: fsreport.OpWrite, flags: flagsNone, fd: -1, path: 0, path2: -1, atFlags: -1},
}

// metaFileCall is the observation of a metadata call (laid out in
// metaCalls), for sandboxes that do not mediate metadata.
func metaFileCall(c metaCall) fileCall {
	return fileCall{op: fsreport.OpMetadata, flags: flagsNone, fd: c.fd, path: c.path, path2: -1,
		nofollow: c.nofollow, atFlags: c.flags, nullPathIsFd: c.nullPathIsFd}
}

// writeIntent matches open's and openat's flags argument with a write
// access mode, O_CREAT or O_TRUNC (O_TMPFILE needs a write mode).
func writeIntent(arg int) seccomp.Matcher {
	return seccomp.AnyBitSet{Arg: arg, Bits: oWriteIntent}
}

// fileRules are the filter's rules for file observation on arch; the
// metadata calls only when metadata is not mediated (they are notified
// already, and a syscall has one rule).
func fileRules(arch string, metadata bool) []seccomp.Rule {
	var rs []seccomp.Rule
	for name, c := range fileCalls {
		if _, ok := seccomp.Number(arch, name); !ok {
			continue // arm64 has only the *at forms
		}
		r := seccomp.Rule{Syscall: name, Action: seccomp.ActNotify, Why: "observed for the run report"}
		if c.flags >= 0 {
			r.Match = writeIntent(c.flags)
		}
		rs = append(rs, r)
	}
	if !metadata {
		for name, c := range metaCalls {
			if _, ok := seccomp.Number(arch, name); !ok || c.path < 0 {
				// fchmod, fchown, f*xattr: a descriptor's file, opened
				// (and, for writing, observed) before. Extractors call
				// them for every file they make.
				continue
			}
			r := seccomp.Rule{Syscall: name, Action: seccomp.ActNotify, Why: "metadata: observed for the run report"}
			if c.nullPathIsFd {
				// utimensat(fd, NULL) (futimens) likewise; only the low
				// word of the pointer is tested, so a path whose
				// address ends in 32 zero bits goes unreported.
				r.Match = seccomp.NoneOf{Arg: c.path, Values: []uint32{0}}
			}
			rs = append(rs, r)
		}
	}
	return rs
}

// openOutcome says what an open with flags does to a name: write (an
// existing file opened for writing or truncated), create (a missing name
// with O_CREAT), or nothing the sandbox could refuse ("": a read, an
// existing name with O_EXCL, a missing one without O_CREAT, a
// directory).
func openOutcome(flags uint64, exists, isDir bool) string {
	write := flags&oAccmode == oWronly || flags&oAccmode == oRdwr || flags&oTrunc != 0
	switch {
	case flags&oPath != 0:
		return "" // neither writes nor creates (openat2 refuses the mix)
	case flags&oTmpfile == oTmpfile:
		// An unnamed file in the directory the path names.
		if exists && isDir {
			return fsreport.OpCreate
		}
		return ""
	case exists && isDir:
		return "" // EISDIR, whatever the mount
	case exists && flags&oCreat != 0 && flags&oExcl != 0:
		return "" // EEXIST
	case exists && write:
		return fsreport.OpWrite
	case !exists && flags&oCreat != 0:
		return fsreport.OpCreate
	}
	return ""
}
