package unixsock

import (
	"bytes"
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

// Kernel limits the mediated calls apply to their arguments.
const (
	pathMax      = 4096  // PATH_MAX, the NUL included
	xattrNameMax = 255   // XATTR_NAME_MAX
	xattrSizeMax = 65536 // XATTR_SIZE_MAX
	atFdcwd      = -100
)

// metaReq is one metadata call, gathered and checked, ready to perform.
type metaReq struct {
	c     metaCall
	errno unix.Errno
	// fd is our descriptor of the file to change: a copy of the
	// target's own descriptor when byFd (the f* calls, a NULL utimensat
	// path), changed with the f* call exactly as the target asked; else
	// an O_PATH descriptor of what the path resolved to, changed through
	// its /proc/self/fd magic link.
	fd      int
	byFd    bool
	symlink bool // fd is a symlink itself (an l* call, AT_SYMLINK_NOFOLLOW)
	mode    uint32
	uid     int
	gid     int
	times   []unix.Timespec // nil: now
	name    string
	value   []byte
	xflags  int
	// seen is the file as the command named it, for [Options].Files;
	// nil when nobody asks or it could not be resolved.
	seen *resolved
}

func (s *Supervisor) handleMeta(n *notif, c metaCall) {
	m := metaReq{c: c, fd: -1}
	if !s.onThread(func() { s.gatherMeta(n, &m) }) {
		return
	}
	errno := m.errno
	if errno == 0 {
		errno = m.perform()
	}
	if m.fd >= 0 {
		unix.Close(m.fd)
	}
	// Recorded before the answer: once answered, the command may end,
	// and its report be taken, before this goroutine gets further.
	if m.seen != nil && (errno == unix.EPERM || errno == unix.EROFS || errno == unix.EACCES) {
		s.opts.Files(fsreport.OpMetadata, m.seen.path, m.seen.real)
	}
	resp := &notifResp{ID: n.ID, Error: -int32(errno)}
	unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(resp)))
	runtime.KeepAlive(resp)
}

// argInt is argument i as the kernel reads an int.
func argInt(n *notif, i int) int { return int(int32(uint32(n.Args[i]))) }

// readString reads a NUL-terminated string of at most max bytes (the NUL
// not included) at addr, a page at a time so that a string ending just
// before an unmapped page reads. tooLong is the errno when there is no
// NUL within max+1 bytes.
func readString(mem int, addr uint64, max int, tooLong unix.Errno) (string, unix.Errno) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	page := uint64(os.Getpagesize())
	var out []byte
	for len(out) <= max {
		n := min(int(page-addr%page), max+1-len(out))
		buf := make([]byte, n)
		k, err := unix.Pread(mem, buf, int64(addr))
		if err != nil || k <= 0 {
			return "", unix.EFAULT
		}
		if i := bytes.IndexByte(buf[:k], 0); i >= 0 {
			return string(append(out, buf[:i]...)), 0
		}
		out = append(out, buf[:k]...)
		addr += uint64(k)
	}
	return "", tooLong
}

func readMem(mem int, addr uint64, n int) ([]byte, unix.Errno) {
	if addr == 0 {
		return nil, unix.EFAULT
	}
	b := make([]byte, n)
	k, err := unix.Pread(mem, b, int64(addr))
	if err != nil || k != n {
		return nil, unix.EFAULT
	}
	return b, 0
}

// readTimes reads a times argument as the kernel would, into the
// timespec pair utimensat takes; nil means "now".
func readTimes(mem int, addr uint64, kind timesKind) ([]unix.Timespec, unix.Errno) {
	if addr == 0 {
		return nil, 0
	}
	le := binary.NativeEndian
	switch kind {
	case timesUtimbuf:
		b, e := readMem(mem, addr, 16)
		if e != 0 {
			return nil, e
		}
		return []unix.Timespec{{Sec: int64(le.Uint64(b))}, {Sec: int64(le.Uint64(b[8:]))}}, 0
	case timesTimeval:
		b, e := readMem(mem, addr, 32)
		if e != 0 {
			return nil, e
		}
		ts := make([]unix.Timespec, 2)
		for i := range ts {
			sec, usec := int64(le.Uint64(b[16*i:])), int64(le.Uint64(b[16*i+8:]))
			if usec < 0 || usec >= 1000000 {
				return nil, unix.EINVAL
			}
			ts[i] = unix.Timespec{Sec: sec, Nsec: usec * 1000}
		}
		return ts, 0
	case timesTimespec:
		b, e := readMem(mem, addr, 32)
		if e != 0 {
			return nil, e
		}
		return []unix.Timespec{
			{Sec: int64(le.Uint64(b)), Nsec: int64(le.Uint64(b[8:]))},
			{Sec: int64(le.Uint64(b[16:])), Nsec: int64(le.Uint64(b[24:]))},
		}, 0
	}
	return nil, unix.EINVAL
}

// gatherMeta runs on the installing thread, which may read the target's
// memory and take its descriptors: it copies the arguments, resolves the
// file in the target's context to a descriptor of our own, and asks the
// policy about that descriptor's real path.
func (s *Supervisor) gatherMeta(n *notif, m *metaReq) {
	c := m.c
	tid := int(n.Pid)
	pidfd, mem, errno := s.openTarget(n)
	if errno != 0 {
		m.errno = errno
		return
	}
	defer unix.Close(pidfd)
	defer unix.Close(mem)
	flags := 0
	if c.flags >= 0 {
		flags = argInt(n, c.flags)
		if flags&^(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
			m.errno = unix.EINVAL
			return
		}
	}
	nofollow := c.nofollow || flags&unix.AT_SYMLINK_NOFOLLOW != 0
	var e unix.Errno
	switch c.op {
	case opChmod:
		m.mode = uint32(n.Args[c.arg]) & 0o7777
	case opChown:
		m.uid, m.gid = argInt(n, c.arg), argInt(n, c.arg+1)
	case opUtimes:
		m.times, e = readTimes(mem, n.Args[c.arg], c.times)
	case opSetxattr, opRemovexattr:
		m.name, e = readString(mem, n.Args[c.arg], xattrNameMax, unix.ERANGE)
		if e == 0 && m.name == "" {
			e = unix.ERANGE
		}
		if e == 0 && c.op == opSetxattr {
			size := n.Args[c.arg+2]
			m.xflags = argInt(n, c.arg+3)
			switch {
			case size > xattrSizeMax:
				e = unix.E2BIG
			case m.xflags&^(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0:
				e = unix.EINVAL
			case size > 0:
				m.value, e = readMem(mem, n.Args[c.arg+1], int(size))
			default:
				m.value = []byte{}
			}
		}
	}
	if e != 0 {
		m.errno = e
		return
	}
	// The file: the target's descriptor, or its path resolved as the
	// kernel would for the target.
	switch {
	case c.path < 0 || c.nullPathIsFd && n.Args[c.path] == 0:
		if c.path >= 0 && (flags != 0 || argInt(n, c.fd) == atFdcwd) {
			m.errno = unix.EINVAL // utimensat(fd, NULL) takes no flags
			if argInt(n, c.fd) == atFdcwd {
				m.errno = unix.EFAULT
			}
			return
		}
		m.byFd = true
		var err error
		if m.fd, err = unix.PidfdGetfd(pidfd, argInt(n, c.fd), 0); err != nil {
			m.fd, m.errno = -1, errnoOf(err, unix.EBADF)
			return
		}
	default:
		path, e := readString(mem, n.Args[c.path], pathMax-1, unix.ENAMETOOLONG)
		if e != 0 {
			m.errno = e
			return
		}
		if m.fd, m.errno = resolveIn(pidfd, tid, c, n, path, flags, nofollow); m.errno != 0 {
			return
		}
		if s.opts.Files != nil {
			dirfd := atFdcwd
			if c.fd >= 0 {
				dirfd = argInt(n, c.fd)
			}
			if r, ok := resolveAt(tid, dirfd, path, nofollow); ok {
				m.seen = &r
			}
		}
	}
	if !s.valid(n.ID) {
		m.errno = unix.ESRCH
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(m.fd, &st); err != nil {
		m.errno = errnoOf(err, unix.EBADF)
		return
	}
	m.symlink = st.Mode&unix.S_IFMT == unix.S_IFLNK
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(m.fd))
	if err != nil {
		m.errno = unix.EPERM
		return
	}
	// Descriptors without a path (pipes, sockets, anonymous inodes)
	// are the command's own or relayed by agentbox; a path must be
	// inside what the policy allows. A deleted file is judged by the
	// name it had.
	if m.byFd && s.opts.Files != nil && strings.HasPrefix(real, "/") && !strings.HasSuffix(real, " (deleted)") && !inProc(real) {
		m.seen = &resolved{path: real, real: real, exists: true}
	}
	if strings.HasPrefix(real, "/") && !s.opts.Metadata(strings.TrimSuffix(real, " (deleted)")) {
		m.errno = unix.EPERM
	}
}

// resolveIn opens path as the target thread tid would resolve it for the
// call c: relative to its cwd or to its directory descriptor, with its own
// /proc/self. The result is an O_PATH descriptor, of a final symlink
// itself when nofollow.
func resolveIn(pidfd, tid int, c metaCall, n *notif, path string, flags int, nofollow bool) (int, unix.Errno) {
	dirfd := atFdcwd
	if c.fd >= 0 {
		dirfd = argInt(n, c.fd)
	}
	if path == "" && flags&unix.AT_EMPTY_PATH == 0 {
		return -1, unix.ENOENT
	}
	if filepath.IsAbs(path) {
		fd, err := unix.Open(inTarget(path, tid), openFlags(nofollow), 0)
		if err != nil {
			return -1, errnoOf(err, unix.ENOENT)
		}
		return fd, 0
	}
	var base int
	var err error
	if dirfd == atFdcwd {
		base, err = unix.Open("/proc/"+strconv.Itoa(tid)+"/cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, unix.EACCES
		}
	} else if base, err = unix.PidfdGetfd(pidfd, dirfd, 0); err != nil {
		return -1, errnoOf(err, unix.EBADF)
	}
	if path == "" {
		return base, 0 // AT_EMPTY_PATH: the directory descriptor's own file
	}
	defer unix.Close(base)
	fd, err := unix.Openat(base, path, openFlags(nofollow), 0)
	if err != nil {
		return -1, errnoOf(err, unix.ENOENT)
	}
	return fd, 0
}

func openFlags(nofollow bool) int {
	f := unix.O_PATH | unix.O_CLOEXEC
	if nofollow {
		f |= unix.O_NOFOLLOW
	}
	return f
}

// perform makes the change on the descriptor that was checked. It runs on
// a thread without the filter.
func (m *metaReq) perform() unix.Errno {
	self := "/proc/self/fd/" + strconv.Itoa(m.fd)
	var err error
	switch m.c.op {
	case opChmod:
		switch {
		case m.byFd:
			err = unix.Fchmod(m.fd, m.mode)
		case m.symlink:
			return unix.EOPNOTSUPP // Linux has no mode on symlinks
		default:
			err = unix.Fchmodat(unix.AT_FDCWD, self, m.mode, 0)
		}
	case opChown:
		if m.byFd {
			err = unix.Fchown(m.fd, m.uid, m.gid)
		} else {
			err = unix.Fchownat(m.fd, "", m.uid, m.gid, unix.AT_EMPTY_PATH)
		}
	case opUtimes:
		switch {
		case m.byFd:
			err = utimensat(m.fd, nil, m.times, 0)
		case m.symlink:
			empty := []byte{0}
			err = utimensat(m.fd, &empty[0], m.times, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
		default:
			p, _ := unix.BytePtrFromString(self)
			err = utimensat(unix.AT_FDCWD, p, m.times, 0)
		}
	case opSetxattr:
		switch {
		case m.byFd:
			err = unix.Fsetxattr(m.fd, m.name, m.value, m.xflags)
		case m.symlink:
			return unix.EPERM // what user.* on a symlink gets; other namespaces need capabilities
		default:
			err = unix.Setxattr(self, m.name, m.value, m.xflags)
		}
	case opRemovexattr:
		switch {
		case m.byFd:
			err = unix.Fremovexattr(m.fd, m.name)
		case m.symlink:
			return unix.EPERM
		default:
			err = unix.Removexattr(self, m.name)
		}
	default:
		return unix.ENOSYS
	}
	if err == nil {
		return 0
	}
	return errnoOf(err, unix.EIO)
}

// utimensat is the raw call: x/sys/unix's wrapper cannot pass a NULL path
// (futimens) nor a NULL times (now).
func utimensat(dirfd int, path *byte, times []unix.Timespec, flags int) error {
	var tp unsafe.Pointer
	if times != nil {
		tp = unsafe.Pointer(&times[0])
	}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(dirfd), uintptr(unsafe.Pointer(path)), uintptr(tp), uintptr(flags), 0, 0)
	runtime.KeepAlive(times)
	runtime.KeepAlive(path)
	if errno != 0 {
		return errno
	}
	return nil
}
