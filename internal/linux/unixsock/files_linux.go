package unixsock

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/fsreport"
)

// fileEvent is one observed operation on one name, ready for Files.
type fileEvent struct {
	op, path, real string
}

// handleFile answers an observed call with "continue", after gathering
// what it names on the installing thread. The answer never depends on
// what was gathered.
func (s *Supervisor) handleFile(n *notif, c fileCall) {
	var evs []fileEvent
	if int(n.Pid) != s.tid {
		s.onThread(func() { evs = s.gatherFile(n, c) })
	}
	resp := &notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(resp)))
	runtime.KeepAlive(resp)
	for _, e := range evs {
		if s.opts.Files(e.op, e.path, e.real) {
			break // a rename's destination is told only when its source was fine
		}
	}
}

// gatherFile reads the call's path arguments and resolves them in the
// target's context. It runs on the installing thread, the one allowed to
// read the target's memory and descriptors (see [Supervisor]). Anything
// that cannot be read or resolved is left out: the call will fail on its
// own (EFAULT, ENOENT), or the report misses a line.
func (s *Supervisor) gatherFile(n *notif, c fileCall) []fileEvent {
	pidfd, mem, errno := s.openTarget(n)
	if errno != 0 {
		return nil
	}
	defer unix.Close(pidfd)
	defer unix.Close(mem)
	tid := int(n.Pid)
	var flags uint64
	switch c.flags {
	case flagsNone:
	case flagsCreat:
		flags = oCreat | oWronly | oTrunc
	case flagsOpenat2:
		b, e := readMem(mem, n.Args[2], 8) // struct open_how's flags
		if e != 0 {
			return nil
		}
		flags = binary.NativeEndian.Uint64(b)
		if flags&oWriteIntent == 0 {
			return nil
		}
	default:
		flags = uint64(uint32(n.Args[c.flags]))
	}
	nofollow := c.nofollow || flags&oNofollw != 0 || flags&(oCreat|oExcl) == oCreat|oExcl
	if c.atFlags >= 0 && argInt(n, c.atFlags)&unix.AT_SYMLINK_NOFOLLOW != 0 {
		nofollow = true
	}
	dirfd := atFdcwd
	if c.fd >= 0 {
		dirfd = argInt(n, c.fd)
	}
	var r resolved
	if c.path < 0 || c.nullPathIsFd && n.Args[c.path] == 0 {
		// The f* metadata calls: the file the descriptor is open on.
		if dirfd == atFdcwd {
			return nil
		}
		var ok bool
		if r, ok = resolveAt(pidfd, tid, dirfd, "", true); !ok {
			return nil
		}
	} else {
		path, e := readString(mem, n.Args[c.path], pathMax-1, unix.ENAMETOOLONG)
		if e != 0 || path == "" {
			return nil
		}
		var ok bool
		if r, ok = resolveAt(pidfd, tid, dirfd, path, nofollow); !ok {
			return nil
		}
	}
	if !s.valid(n.ID) {
		return nil
	}
	op := c.op
	switch {
	case c.flags != flagsNone:
		if op = openOutcome(flags, r.exists, r.isDir); op == "" {
			return nil
		}
	case c.create && r.exists:
		return nil // EEXIST, whatever the mount
	case c.op == fsreport.OpDelete:
		// unlink and rmdir ask for the mount's write access before
		// looking the name up: a missing name on a read-only mount is
		// EROFS, a refusal like any other.
	case !c.create && !r.exists:
		return nil // ENOENT
	}
	evs := []fileEvent{{op, r.path, r.real}}
	if c.path2 >= 0 {
		path, e := readString(mem, n.Args[c.path2], pathMax-1, unix.ENAMETOOLONG)
		if e != 0 || path == "" {
			return evs
		}
		dir2 := atFdcwd
		if c.fd2 >= 0 {
			dir2 = argInt(n, c.fd2)
		}
		r2, ok := resolveAt(pidfd, tid, dir2, path, true)
		if !ok {
			return evs
		}
		if r.mnt != 0 && r2.mnt != 0 && r.mnt != r2.mnt {
			// EXDEV (mv then copies and unlinks, which are seen).
			return nil
		}
		evs = append(evs, fileEvent{op, r2.path, r2.real})
	}
	return evs
}

// resolved is a name of the target's, resolved in its context.
type resolved struct {
	// path is the name as the target gave it, made absolute against
	// its cwd or directory descriptor, and cleaned.
	path string
	// real is what the kernel will act on: the real path of the
	// directory the name is in, and the name, or the real path of a
	// final symlink's target when the call follows it.
	real          string
	exists, isDir bool
	// mnt is the mount id of the directory the name is in (0 unknown):
	// a rename between two mounts fails with EXDEV before any mount's
	// read-only flag is looked at.
	mnt uint64
}

// resolveAt resolves path (empty: the descriptor dirfd itself) as the
// target thread tid would, relative to its cwd (dirfd AT_FDCWD) or to
// its descriptor dirfd, with its own /proc/self. Paths inside /proc are
// left out (false): their magic links would resolve as the supervisor's.
func resolveAt(pidfd, tid, dirfd int, path string, nofollow bool) (resolved, bool) {
	var r resolved
	var base int
	var err error
	switch {
	case filepath.IsAbs(path):
		path = inTarget(path, tid)
		base, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	case dirfd == atFdcwd:
		base, err = unix.Open("/proc/"+strconv.Itoa(tid)+"/cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	default:
		base, err = unix.PidfdGetfd(pidfd, dirfd, 0)
	}
	if err != nil {
		return r, false
	}
	defer unix.Close(base)
	baseName, ok := fdPath(base)
	if !ok {
		return r, false
	}
	if path == "" {
		// The descriptor's own file.
		var st unix.Stat_t
		if unix.Fstat(base, &st) != nil {
			return r, false
		}
		r = resolved{path: baseName, real: baseName, exists: true, isDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
		return r, !inProc(r.path)
	}
	r.path = filepath.Join(baseName, path)
	if inProc(r.path) {
		return r, false
	}
	dir, name := filepath.Split(path)
	name = strings.TrimSuffix(name, "/")
	parent := base
	if dir != "" {
		if parent, err = unix.Openat(base, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return r, false // the call fails with ENOENT or ENOTDIR
		}
		defer unix.Close(parent)
	}
	parentReal, ok := fdPath(parent)
	if !ok {
		return r, false
	}
	var stx unix.Statx_t
	if unix.Statx(parent, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx) == nil && stx.Mask&unix.STATX_MNT_ID != 0 {
		r.mnt = stx.Mnt_id
	}
	if name == "" || name == "." || name == ".." {
		// "mkdir x/", rmdir ".": the directory itself.
		fd, err := unix.Openat(parent, orDot(name), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return r, false
		}
		defer unix.Close(fd)
		real, ok := fdPath(fd)
		r.real, r.exists, r.isDir = real, true, true
		return r, ok && !inProc(real)
	}
	r.real = filepath.Join(parentReal, name)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return r, !inProc(r.real) // missing: the name in its real directory
	}
	r.exists = true
	if st.Mode&unix.S_IFMT == unix.S_IFLNK && !nofollow {
		// The call acts on what the link points at.
		fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			// A dangling link: open(O_CREAT) makes its target, which
			// the report names by the link.
			r.exists = false
			return r, !inProc(r.real)
		}
		defer unix.Close(fd)
		if unix.Fstat(fd, &st) != nil {
			return r, false
		}
		if r.real, ok = fdPath(fd); !ok {
			return r, false
		}
	}
	r.isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	return r, !inProc(r.real)
}

func orDot(name string) string {
	if name == "" {
		return "."
	}
	return name
}

// fdPath is the path our descriptor fd is open on, as the kernel names
// it; false for descriptors without one (pipes, sockets, deleted files).
func fdPath(fd int) (string, bool) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}

func inProc(p string) bool { return p == "/proc" || strings.HasPrefix(p, "/proc/") }
