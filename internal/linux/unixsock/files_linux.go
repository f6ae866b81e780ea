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
// what was gathered. It runs on the serve goroutine, which hands the
// whole call to the installing thread and goes on receiving: one thread
// wake-up per call, none for the answer.
func (s *Supervisor) handleFile(n *notif, c fileCall) {
	if int(n.Pid) == s.tid || !s.post(func() { s.observe(n, c) }) {
		s.continueCall(n.ID)
	}
}

// observe gathers the call, answers it and tells Files. It runs on the
// installing thread.
func (s *Supervisor) observe(n *notif, c fileCall) {
	evs := s.gatherFile(n, c)
	// Told before the answer, so that the command's report, taken once
	// it has ended, holds the call.
	for _, e := range evs {
		if s.opts.Files(e.op, e.path, e.real) {
			break // a rename's destination is told only when its source was fine
		}
	}
	s.continueCall(n.ID)
}

// continueCall answers the notification id with "continue": the kernel
// runs the call as it would have without the filter.
func (s *Supervisor) continueCall(id uint64) {
	resp := &notifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(resp)))
	runtime.KeepAlive(resp)
}

// gatherFile reads the call's path arguments and resolves them in the
// target's context. It runs on the installing thread, the one allowed to
// read the target's memory and descriptors (see [Supervisor]). Anything
// that cannot be read or resolved is left out: the call will fail on its
// own (EFAULT, ENOENT), or the report misses a line. The notification is
// checked once, at the end: until it is answered the target thread
// waits in the call, and a thread killed meanwhile (its tid reused)
// makes the check fail.
func (s *Supervisor) gatherFile(n *notif, c fileCall) []fileEvent {
	tid := int(n.Pid)
	mem, ok := targetMem(tid)
	if !ok {
		return nil // not dumpable, or gone: a line less in the report
	}
	defer unix.Close(mem)
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
		if r, ok = resolveAt(tid, dirfd, "", true); !ok {
			return nil
		}
	} else {
		path, e := readString(mem, n.Args[c.path], pathMax-1, unix.ENAMETOOLONG)
		if e != 0 || path == "" {
			return nil
		}
		if r, ok = resolveAt(tid, dirfd, path, nofollow); !ok {
			return nil
		}
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
		if r2, ok := s.renameTarget(n, c, tid, mem, r); ok {
			evs = append(evs, fileEvent{op, r2.path, r2.real})
		} else if r2.path == "" {
			evs = nil // EXDEV: not a refusal
		}
	}
	if !s.valid(n.ID) {
		return nil
	}
	return evs
}

// renameTarget resolves a rename's destination. A rename between two
// mounts fails with EXDEV before any mount's read-only flag is looked at
// (mv then copies and unlinks, which are seen): that gives false and an
// empty path.
func (s *Supervisor) renameTarget(n *notif, c fileCall, tid, mem int, src resolved) (resolved, bool) {
	path, e := readString(mem, n.Args[c.path2], pathMax-1, unix.ENAMETOOLONG)
	if e != 0 || path == "" {
		return resolved{path: "-"}, false
	}
	dir := atFdcwd
	if c.fd2 >= 0 {
		dir = argInt(n, c.fd2)
	}
	r, ok := resolveAt(tid, dir, path, true)
	if !ok {
		return resolved{path: "-"}, false
	}
	if a, b := mountID(filepath.Dir(src.real)), mountID(filepath.Dir(r.real)); a != 0 && b != 0 && a != b {
		return resolved{}, false
	}
	return r, true
}

// mountID is the id of the mount path is on, 0 when unknown.
func mountID(path string) uint64 {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0
	}
	return stx.Mnt_id
}

// targetMem opens the memory of the target thread tid (the sandbox's
// seccomp filter refuses process_vm_readv to the supervisor as to the
// command).
func targetMem(tid int) (int, bool) {
	mem, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	return mem, err == nil
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
}

// resolveAt resolves path (empty: the descriptor dirfd itself) as the
// target thread tid would, relative to its cwd (dirfd AT_FDCWD) or to
// its descriptor dirfd, with its own /proc/self, in as few calls as it
// can: the target's directory is read from its magic link in /proc, and
// the rest resolved from there in the supervisor's own view, which is
// the command's (the same mount namespace and root). Paths inside /proc
// are left out (false): their magic links would resolve as the
// supervisor's.
func resolveAt(tid, dirfd int, path string, nofollow bool) (resolved, bool) {
	var r resolved
	var base string
	var err error
	switch {
	case filepath.IsAbs(path):
		path = inTarget(path, tid)
	case dirfd == atFdcwd:
		base, err = os.Readlink("/proc/" + strconv.Itoa(tid) + "/cwd")
	default:
		base, err = os.Readlink("/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.Itoa(dirfd))
	}
	if err != nil || base != "" && (!filepath.IsAbs(base) || strings.HasSuffix(base, " (deleted)")) {
		return r, false // a descriptor without a path, a directory gone
	}
	if path == "" {
		// The descriptor's own file.
		var st unix.Stat_t
		if base == "" || unix.Stat(base, &st) != nil {
			return r, false
		}
		r = resolved{path: base, real: base, exists: true, isDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
		return r, !inProc(r.path)
	}
	full := path
	if base != "" {
		full = filepath.Join(base, path)
	}
	r.path = filepath.Clean(full)
	if inProc(r.path) {
		return r, false
	}
	dir, name := filepath.Split(strings.TrimRight(full, "/"))
	if name == "" || name == "." || name == ".." {
		// "/", "x/.": the directory itself.
		dir, name = full, "."
	}
	parent, err := unix.Open(orDot(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return r, false // the call fails with ENOENT or ENOTDIR
	}
	defer unix.Close(parent)
	parentReal, ok := fdPath(parent)
	if !ok {
		return r, false
	}
	if name == "." || name == ".." {
		r.real, r.exists, r.isDir = filepath.Clean(filepath.Join(parentReal, name)), true, true
		return r, !inProc(r.real)
	}
	r.real = filepath.Join(parentReal, name)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return r, !inProc(r.real) // missing: the name in its real directory
	}
	r.exists = true
	if st.Mode&unix.S_IFMT == unix.S_IFLNK && !nofollow {
		// The call acts on what the link points at. A link into the
		// caller's own /proc (/dev/stdout) would resolve as the
		// supervisor's: leave it out, as /proc is.
		var buf [64]byte
		if k, err := unix.Readlinkat(parent, name, buf[:]); err == nil && k < len(buf) && inTarget(string(buf[:k]), tid) != string(buf[:k]) {
			return r, false
		}
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
