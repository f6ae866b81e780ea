package unixsock

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// struct seccomp_notif and struct seccomp_notif_resp.
type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// maxSockaddr is sizeof(struct sockaddr_storage); connect(2) fails with
// EINVAL beyond it, and an AF_UNIX address beyond sizeof(struct
// sockaddr_un) likewise.
const (
	maxSockaddr   = 128
	maxSockaddrUn = 110
)

// Install loads the filter of [BuildProgram] for this architecture onto
// the calling thread only (no TSYNC) and returns the listener fd.
//
// The caller must hold [runtime.LockOSThread] and keep it: processes
// forked from this thread inherit the filter, and the Go runtime creates
// new threads from a clean template thread rather than from a locked one,
// so the supervisor's goroutines never run under this filter (if they
// did, the supervisor's own connect would wait on itself). A main
// seccomp filter installed with TSYNC must come first: TSYNC after this
// one would copy it to every thread.
func Install() (int, error) {
	return install(false, false)
}

func install(metadata, files bool) (int, error) {
	i := 0
	if metadata {
		i |= 1
	}
	if files {
		i |= 2
	}
	p := &programs[i]
	p.once.Do(func() { p.prog, p.err = buildProgram(runtime.GOARCH, metadata, files) })
	if p.err != nil {
		return -1, p.err
	}
	return seccomp.InstallListener(p.prog)
}

// programs are the filters of install, with and without metadata and
// file observation, each built once: a session's zygote installs one for
// every command.
var programs [4]struct {
	once sync.Once
	prog []bpf.RawInstruction
	err  error
}

// Supervisor answers the filter's notifications.
//
// The steps that need ptrace access to the target (opening
// /proc/<tid>/mem and /proc/<tid>/cwd, pidfd_getfd) run on the thread
// that installed the filter, inside [Supervisor.Wait4]: Landlock before
// ABI 8 gives each thread of a process its own sibling domain, and only
// the thread the command was forked from is in a domain that may access
// it (Yama's ptrace_scope=1 is satisfied by any thread, being the
// target's ancestor). The connect itself runs on other threads, which do
// not carry the filter.
type Supervisor struct {
	fd    int
	allow func(string, *unix.Stat_t) bool
	opts  Options
	work  chan func()
	// wake counts the work handed to work (an eventfd), so that
	// [Supervisor.WaitPidfd] can sleep in one poll(2) on it and the
	// command's pidfd; once WaitPidfd has returned (waited set, under
	// wakeMu), nobody takes work any more and wake is closed.
	wake   int
	wakeMu sync.Mutex
	waited chan struct{}
	// meta maps the numbers of the mediated metadata calls to their
	// layout; empty without [Options].Metadata.
	meta map[int32]metaCall
	// files maps the numbers of the observed file calls to their
	// layout; empty without [Options].Files.
	files map[int32]fileCall
	// recvMu serializes receiving, which the serve goroutine and the
	// installing thread (while it waits) both do; paused counts the
	// installing thread's waits, during which the serve goroutine
	// sleeps on pauseCond; pauseFd wakes it from its poll for that.
	recvMu    sync.Mutex
	pauseMu   sync.Mutex
	pauseCond *sync.Cond
	paused    int
	pauseFd   int
	// tid is the thread that installed the filter: its own observed
	// calls (a zygote opening /dev/null for a command's init) are
	// answered at once, since the work of gathering them would wait for
	// that very thread.
	tid int
}

// Options adjust what the supervisor lets through.
type Options struct {
	// RefuseAbstract refuses every connect to an abstract AF_UNIX
	// address with EACCES. Set it when the command shares the host's
	// network namespace: abstract names are per network namespace, and
	// the supervisor's own connect is not subject to the command's
	// Landlock scoping, so it would reach the host's abstract sockets
	// (D-Bus, X11, containerd and the like).
	RefuseAbstract bool
	// AllowInet, when set, is asked about every AF_INET and AF_INET6
	// connect (IPv4-mapped addresses unmapped); a false answer refuses
	// it with EACCES. The supervisor connects with its own copy of the
	// address it asked about, so the command cannot swap it afterwards.
	AllowInet func(netip.AddrPort) bool
	// Abstract, when set, decides about every abstract AF_UNIX address
	// (sunPath is the whole sun_path, its leading NUL included): false
	// refuses the connect with EACCES. For a command that shares the
	// host's network namespace but has a pid namespace of its own.
	Abstract func(sunPath []byte) bool
	// Connected, when set, is told about every AF_INET and AF_INET6
	// connect the supervisor made for the command, after it: the
	// command's socket (open until Connected returns), the destination
	// (IPv4-mapped addresses unmapped) and connect's result. It records,
	// and decides nothing: which command a local port is (a session's
	// name server asks), which destinations were unreachable.
	Connected func(sock int, dst netip.AddrPort, errno unix.Errno)
	// Metadata, when set, makes chmod, chown, utimes and the xattr calls
	// (and their f*, l* and *at forms) go through the supervisor too
	// (metadata.go): the change is made only when Metadata says yes to
	// the real path of the file, and refused with EPERM otherwise. For a
	// command without a mount namespace, whose writable roots are
	// Landlock's only, which does not cover metadata.
	Metadata func(realPath string) bool
	// Stale, when set, is asked about the real path of a socket the
	// policy refuses: true makes the refusal ECONNREFUSED, what connect
	// says when nobody listens, instead of EACCES. For the sandbox's
	// private temporary directories, where no host daemon can listen:
	// a socket the command cannot reach there is one an earlier run
	// left, and tools (tmux, emacs, ssh's ControlMaster) replace a stale
	// socket only on ECONNREFUSED.
	Stale func(realPath string) bool
	// Files, when set, is told about the command's calls that change
	// the filesystem (files.go): the operation (an fsreport op), the
	// path as the command named it made absolute, and the real path it
	// resolves to; it says whether the sandbox refuses the operation
	// (for a rename, the destination is told only when the source is
	// not refused). It decides nothing: every observed call continues
	// as the kernel would run it. With Metadata set, the mediated
	// metadata calls are told too.
	Files func(op, path, realPath string) bool
}

// Start installs the filter on the calling thread ([Install]) and starts
// supervising: allow is asked about the real path of every AF_UNIX
// socket inode a connect names, with that inode's stat; opts say what
// else is refused. The caller must then wait for its children with
// [Supervisor.Wait4] on this same thread, which is where part of the
// work happens.
func Start(allow func(absPath string, st *unix.Stat_t) bool, opts Options) (*Supervisor, error) {
	fd, err := install(opts.Metadata != nil, opts.Files != nil)
	if err != nil {
		return nil, err
	}
	// Linux 6.6+: wake the supervisor on the target's CPU, which cuts
	// the round trip; older kernels refuse the flag, and that is fine.
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	pauseFd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		unix.Close(wake)
		return nil, os.NewSyscallError("eventfd", err)
	}
	s := &Supervisor{fd: fd, allow: allow, opts: opts, work: make(chan func()), wake: wake, waited: make(chan struct{}), meta: map[int32]metaCall{},
		files: map[int32]fileCall{}, tid: unix.Gettid(), pauseFd: pauseFd}
	s.pauseCond = sync.NewCond(&s.pauseMu)
	if opts.Files != nil {
		for name, c := range fileCalls {
			if nr, ok := seccomp.Number(runtime.GOARCH, name); ok {
				s.files[int32(nr)] = c
			}
		}
		if opts.Metadata == nil {
			for name, c := range metaCalls {
				if nr, ok := seccomp.Number(runtime.GOARCH, name); ok {
					s.files[int32(nr)] = metaFileCall(c)
				}
			}
		}
	}
	if opts.Metadata != nil {
		for name, c := range metaCalls {
			if nr, ok := seccomp.Number(runtime.GOARCH, name); ok {
				s.meta[int32(nr)] = c
			}
		}
	}
	go s.serve()
	return s, nil
}

// Wait4 is [unix.Wait4] that, while it waits, runs the supervisor's work
// for the calling thread. Call it from the thread that called [Start].
func (s *Supervisor) Wait4(pid int, ws *unix.WaitStatus, options int, ru *unix.Rusage) (int, error) {
	type result struct {
		pid int
		ws  unix.WaitStatus
		err error
	}
	done := make(chan result, 1)
	ended, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return 0, os.NewSyscallError("eventfd", err)
	}
	defer unix.Close(ended)
	go func() {
		// A child forked by any thread of the process can be waited
		// for from any other thread.
		var w unix.WaitStatus
		p, err := unix.Wait4(pid, &w, options, ru)
		done <- result{p, w, err}
		var one [8]byte
		*(*uint64)(unsafe.Pointer(&one[0])) = 1
		unix.Write(ended, one[:])
	}()
	// This thread receives the calls itself while it waits (served),
	// as WaitPidfdOr does.
	s.pause()
	defer s.resume()
	pfd := []unix.PollFd{{Fd: int32(ended), Events: unix.POLLIN}, {Fd: int32(s.wake), Events: unix.POLLIN}, {Fd: int32(s.fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
			// Not expected: take the work from the channel alone, and
			// leave the receiving to the serve goroutine.
			s.resume()
			defer s.pause() // balances the deferred resume
			for {
				select {
				case r := <-done:
					if ws != nil {
						*ws = r.ws
					}
					return r.pid, r.err
				case f := <-s.work:
					f()
				}
			}
		}
		s.served(pfd[1:])
		if pfd[0].Revents != 0 {
			r := <-done
			if ws != nil {
				*ws = r.ws
			}
			return r.pid, r.err
		}
	}
}

// served does what the installing thread's poll found for it: pfd[0] is
// the work counter (s.wake), pfd[1] the listener, whose calls this thread
// receives itself while it waits (no other thread need wake for an
// observed call) and stops polling once it is gone.
func (s *Supervisor) served(pfd []unix.PollFd) {
	if pfd[0].Revents&unix.POLLIN != 0 {
		// Each handle counted one piece of work before handing it
		// over: take exactly that many.
		var b [8]byte
		if _, err := unix.Read(s.wake, b[:]); err == nil {
			for n := *(*uint64)(unsafe.Pointer(&b[0])); n > 0; n-- {
				(<-s.work)()
			}
		}
	}
	switch l := &pfd[1]; {
	case l.Revents&unix.POLLIN != 0:
		if n := s.recv(); n != nil {
			s.dispatch(n, true)
		}
	case l.Revents != 0:
		l.Fd = -1 // hung up or closed (the serve goroutine gave up)
	}
}

// pause keeps the serve goroutine from receiving while the installing
// thread waits and receives itself; resume lets it go on.
func (s *Supervisor) pause() {
	s.pauseMu.Lock()
	s.paused++
	s.pauseMu.Unlock()
	var one [8]byte
	*(*uint64)(unsafe.Pointer(&one[0])) = 1
	unix.Write(s.pauseFd, one[:])
}

func (s *Supervisor) resume() {
	s.pauseMu.Lock()
	s.paused--
	s.pauseCond.Broadcast()
	s.pauseMu.Unlock()
}

// recv takes the next notification if one is pending, nil otherwise: two
// receivers (the serve goroutine and the installing thread) may have been
// woken for one notification, and RECV blocks when there is none, which
// the installing thread must never do.
func (s *Supervisor) recv() *notif {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 0); err != nil || n == 0 || pfd[0].Revents&unix.POLLIN == 0 {
		return nil
	}
	n := new(notif)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
	if errno != 0 {
		return nil // interrupted, or the target died before we got to it
	}
	return n
}

// dispatch answers one notification: an observed call on the installing
// thread (here when onThread, else handed to it), anything else on a
// goroutine of its own.
func (s *Supervisor) dispatch(n *notif, onThread bool) {
	if c, ok := s.files[n.Nr]; ok {
		if onThread {
			s.observe(n, c)
		} else {
			s.handleFile(n, c)
		}
		return
	}
	go s.handle(n)
}

// WaitPidfd waits for the child pid, whose pidfd is given, and runs the
// supervisor's work for the calling thread meanwhile, as [Supervisor.Wait4]
// does, but sleeping in one poll(2) on this thread: no other goroutine
// has to wake this one when the child ends. Call it from the thread that
// called [Start], at most once. It closes the supervisor's eventfd.
func (s *Supervisor) WaitPidfd(pidfd, pid int, ws *unix.WaitStatus) error {
	_, err := s.WaitPidfdOr(pidfd, pid, -1, ws)
	return err
}

// WaitPidfdOr is [Supervisor.WaitPidfd] that also returns, with exited
// false and the child still to be waited for, once fd (when not -1) is
// readable. The supervisor's work ends there too: call it only when no
// process left would need it.
func (s *Supervisor) WaitPidfdOr(pidfd, pid, fd int, ws *unix.WaitStatus) (exited bool, err error) {
	defer func() {
		s.wakeMu.Lock()
		close(s.waited)
		unix.Close(s.wake)
		s.wakeMu.Unlock()
	}()
	// This thread receives the calls itself while it waits (served):
	// an observed call then costs one wake-up, of this thread, instead
	// of the serve goroutine's and then this one's.
	s.pause()
	paused := true
	defer func() {
		if paused {
			s.resume()
		}
	}()
	pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}, {Fd: int32(fd), Events: unix.POLLIN},
		{Fd: int32(s.wake), Events: unix.POLLIN}, {Fd: int32(s.fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(pfd, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			// Not expected: fall back to Wait4, which pauses the
			// serve goroutine itself (and, should its poll fail too,
			// leaves the receiving to it).
			s.resume()
			paused = false
			for {
				_, err := s.Wait4(pid, ws, 0, nil)
				if err != unix.EINTR {
					return true, err
				}
			}
		}
		s.served(pfd[2:])
		if pfd[0].Revents != 0 {
			for {
				_, err := unix.Wait4(pid, ws, 0, nil)
				if err != unix.EINTR {
					return true, err
				}
			}
		}
		if pfd[1].Revents != 0 {
			return false, nil
		}
	}
}

func (s *Supervisor) serve() {
	for {
		// While the installing thread waits it receives itself
		// (pause): sleep meanwhile rather than race it for each call.
		s.pauseMu.Lock()
		for s.paused > 0 {
			s.pauseCond.Wait()
		}
		s.pauseMu.Unlock()
		// Once no process uses the filter any more (the command and
		// the thread it was forked from are gone) the listener reports
		// POLLHUP, while RECV would block forever: a session's zygote
		// starts one supervisor per command and must not keep a thread
		// blocked for each finished one.
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.pauseFd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			continue // EINTR
		}
		if pfd[1].Revents&unix.POLLIN != 0 {
			var b [8]byte
			unix.Read(s.pauseFd, b[:])
			continue
		}
		if pfd[0].Revents&unix.POLLIN == 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			s.recvMu.Lock()
			unix.Close(s.fd)
			unix.Close(s.pauseFd)
			s.recvMu.Unlock()
			return
		}
		s.recvMu.Lock()
		n := new(notif)
		pfd = pfd[:1]
		var errno unix.Errno
		if k, err := unix.Poll(pfd, 0); err != nil || k == 0 || pfd[0].Revents&unix.POLLIN == 0 {
			// The installing thread took it.
			errno = unix.ENOENT
		} else {
			_, _, errno = unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
		}
		s.recvMu.Unlock()
		switch errno {
		case 0:
			s.dispatch(n, false)
		case unix.EINTR, unix.ENOENT:
			// Interrupted, or the target died before we got to it.
		default:
			// Closing the listener makes every pending and future
			// connect fail with ENOSYS rather than hang.
			fmt.Fprintf(os.Stderr, "agentbox: unix socket supervisor stopped: %v; connect(2) now fails in the sandbox\n", errno)
			s.recvMu.Lock()
			unix.Close(s.fd)
			s.recvMu.Unlock()
			return
		}
	}
}

// onThread runs f on the thread that started the supervisor (inside its
// Wait4 or WaitPidfd) and returns when f has; false when WaitPidfd has
// returned: the command is gone, and there is nothing left to do.
func (s *Supervisor) onThread(f func()) bool {
	done := make(chan struct{})
	if !s.post(func() {
		f()
		close(done)
	}) {
		return false
	}
	<-done
	return true
}

// post hands f to the thread that started the supervisor, as onThread
// does, without waiting for it to run; false when WaitPidfd has returned.
func (s *Supervisor) post(f func()) bool {
	// Counted before it is handed over, for WaitPidfd; Wait4 ignores
	// the count.
	s.wakeMu.Lock()
	select {
	case <-s.waited:
		s.wakeMu.Unlock()
		return false
	default:
	}
	var one [8]byte
	*(*uint64)(unsafe.Pointer(&one[0])) = 1
	unix.Write(s.wake, one[:])
	s.wakeMu.Unlock()
	select {
	case s.work <- f:
		return true
	case <-s.waited:
		return false
	}
}

func (s *Supervisor) handle(n *notif) {
	if c, ok := s.meta[n.Nr]; ok {
		s.handleMeta(n, c)
		return
	}
	g := gathered{sock: -1, path: -1}
	if !s.onThread(func() { g = s.gather(n) }) {
		return
	}
	errno := g.errno
	if errno == 0 {
		errno = s.connect(&g)
		if s.opts.Connected != nil && len(g.addr) >= 2 {
			if ap, ok := inetAddr(g.addr, binary.NativeEndian.Uint16(g.addr)); ok {
				s.opts.Connected(g.sock, ap, errno)
			}
		}
	}
	g.close()
	resp := &notifResp{ID: n.ID, Error: -int32(errno)}
	// ENOENT: the target died or was interrupted by a fatal signal.
	unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(resp)))
	runtime.KeepAlive(resp)
}

// gathered is what the installing thread collects for one connect.
type gathered struct {
	errno unix.Errno
	sock  int    // the target's socket, through pidfd_getfd
	addr  []byte // our copy of the address
	path  int    // for a pathname AF_UNIX address: O_PATH fd of what it names
}

func (g *gathered) close() {
	if g.sock >= 0 {
		unix.Close(g.sock)
	}
	if g.path >= 0 {
		unix.Close(g.path)
	}
}

func (s *Supervisor) valid(id uint64) bool {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return errno == 0
}

func errnoOf(err error, dflt unix.Errno) unix.Errno {
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return dflt
}

// openTarget opens a pidfd and the memory of the thread that made the
// notified call, and checks the notification is still valid: the tid could
// have been reused between RECV and the opens, and once the notification
// holds, the fds are the target's. A target out of reach (not dumpable)
// gets EACCES: fail closed.
func (s *Supervisor) openTarget(n *notif) (pidfd, mem int, errno unix.Errno) {
	tid := int(n.Pid)
	pidfd, err := pidfdOpen(tid)
	if err != nil {
		return -1, -1, unix.ESRCH
	}
	mem, err = unix.Open("/proc/"+strconv.Itoa(tid)+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(pidfd)
		return -1, -1, unix.EACCES
	}
	if !s.valid(n.ID) {
		unix.Close(pidfd)
		unix.Close(mem)
		return -1, -1, unix.ESRCH
	}
	return pidfd, mem, 0
}

// gather runs on the installing thread: everything that needs ptrace
// access to the target happens here.
func (s *Supervisor) gather(n *notif) (g gathered) {
	g.sock, g.path = -1, -1
	tid := int(n.Pid)
	addrLen := int32(uint32(n.Args[2])) // socklen_t, taken as int by the kernel
	if addrLen < 0 || addrLen > maxSockaddr {
		g.errno = unix.EINVAL
		return
	}
	pidfd, mem, errno := s.openTarget(n)
	if errno != 0 {
		g.errno = errno
		return
	}
	defer unix.Close(pidfd)
	defer unix.Close(mem)
	g.addr = make([]byte, addrLen)
	if addrLen > 0 {
		k, err := unix.Pread(mem, g.addr, int64(n.Args[1]))
		if err != nil || k != len(g.addr) {
			g.errno = unix.EFAULT
			return
		}
	}
	var err error
	g.sock, err = unix.PidfdGetfd(pidfd, int(int32(uint32(n.Args[0]))), 0)
	if err != nil {
		g.sock = -1
		g.errno = errnoOf(err, unix.EBADF)
		return
	}
	if len(g.addr) < 2 {
		return
	}
	family := binary.NativeEndian.Uint16(g.addr)
	if s.opts.AllowInet != nil && (family == unix.AF_INET || family == unix.AF_INET6) {
		if ap, ok := inetAddr(g.addr, family); !ok || !s.opts.AllowInet(ap) {
			g.errno = unix.EACCES
		}
		return
	}
	if abstract(g.addr, family) && (s.opts.RefuseAbstract || s.opts.Abstract != nil && !s.opts.Abstract(g.addr[2:])) {
		g.errno = unix.EACCES
		return
	}
	path, ok := unixPath(g.addr, family)
	if !ok {
		return
	}
	if len(g.addr) > maxSockaddrUn {
		g.errno = unix.EINVAL
		return
	}
	// Resolve the path as the target would: relative to its cwd, with
	// its own /proc/self. O_PATH follows symlinks to the inode that
	// connect would reach, and holding it closes the race with a
	// rename or a symlink swap.
	path = inTarget(path, tid)
	dir := unix.AT_FDCWD
	if !filepath.IsAbs(path) {
		dir, err = unix.Open("/proc/"+strconv.Itoa(tid)+"/cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			g.errno = unix.EACCES
			return
		}
		defer unix.Close(dir)
	}
	g.path, err = unix.Openat(dir, path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		g.path = -1
		g.errno = errnoOf(err, unix.ENOENT)
		return
	}
	if !s.valid(n.ID) {
		g.errno = unix.ESRCH
		return
	}
	g.errno = s.decide(g.path)
	return
}

// decide asks the policy about the socket inode a pathname address
// resolved to. It runs on the installing thread with the rest of gather:
// the policy may look at the command's processes (/proc/<pid>/fd), which
// only this thread's Landlock domain allows.
func (s *Supervisor) decide(path int) unix.Errno {
	var st unix.Stat_t
	if err := unix.Fstat(path, &st); err != nil {
		return errnoOf(err, unix.EACCES)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return unix.ECONNREFUSED // what connect(2) says for a non-socket
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(path))
	if err != nil || !filepath.IsAbs(real) || strings.HasSuffix(real, " (deleted)") {
		return unix.EACCES
	}
	if !s.allow(real, &st) {
		if s.opts.Stale != nil && s.opts.Stale(real) {
			return unix.ECONNREFUSED
		}
		return unix.EACCES
	}
	return 0
}

// connect runs on a thread without the filter.
func (s *Supervisor) connect(g *gathered) unix.Errno {
	if g.path < 0 {
		return rawConnect(g.sock, g.addr)
	}
	self := "/proc/self/fd/" + strconv.Itoa(g.path)
	// Connect through the magic link to the very inode just checked;
	// it also keeps any path within sun_path's 108 bytes.
	addr := make([]byte, 2+len(self)+1)
	binary.NativeEndian.PutUint16(addr, unix.AF_UNIX)
	copy(addr[2:], self)
	for {
		// A unix connect that was interrupted has no state to trip
		// over when repeated.
		if errno := rawConnect(g.sock, addr); errno != unix.EINTR {
			return errno
		}
	}
}

func rawConnect(fd int, addr []byte) unix.Errno {
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(p), uintptr(len(addr)))
	runtime.KeepAlive(addr)
	return errno
}

// pidfdOpen opens a pidfd for the thread tid: pidfd_getfd must see that
// thread's file table, which unshare(CLONE_FILES) may have made its own.
func pidfdOpen(tid int) (int, error) {
	const pidfdThread = unix.O_EXCL // PIDFD_THREAD, Linux 6.9
	fd, err := unix.PidfdOpen(tid, pidfdThread)
	if err != unix.EINVAL {
		return fd, err
	}
	if fd, err = unix.PidfdOpen(tid, 0); err != unix.EINVAL {
		return fd, err
	}
	// An older kernel and a thread that is not the leader: use its
	// process.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return -1, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			tgid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return -1, err
			}
			return unix.PidfdOpen(tgid, 0)
		}
	}
	return -1, unix.ESRCH
}
