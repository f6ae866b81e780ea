// Package ident is what the resident helper and its clients know each
// other by: the peer at the other end of the helper's socket (this user,
// outside every sandbox), and what a request must match for the helper to
// start its command as the client would have (the same build, umask and
// resource limits).
//
// The lean `agentbox run` client (package client) uses it from a
// package init that runs before most of the binary's packages are
// initialised, so it imports only packages that initialise early: os,
// syscall, strconv and errors (no fmt, strings, bytes or x/sys/unix,
// whose dependencies would pull most of the binary's inits in ahead of
// it).
package ident

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// The helper and the CLI authenticate each other on every connection,
// independently of where the socket lives and of the sandbox's unix socket
// mediation: the peer must be this user, outside every sandbox. A
// sandboxed process is recognised by what it cannot shed: a lone run's
// command (and a session's) lives in other user, mount and pid namespaces;
// a degraded one shares them but carries at least one more seccomp filter
// than the unconfined process that started it (filters can be added, never
// removed) and, with it, no_new_privs. So the peer must share our
// namespaces and have exactly our seccomp mode, filter count and
// no_new_privs, on every one of its threads (a seccomp filter is a thread's
// attribute: the thread that connected need not be the leader), and no
// thread may be a zombie.

// facts is what tells a process apart from a sandboxed one.
type facts struct {
	uid int
	ns  [4]string // user, mnt, pid, net links, e.g. "user:[4026531837]"
	// The cgroups and the security module's label: a client in another
	// cgroup (its memory limit) or under another AppArmor or SELinux
	// label is not confined as the helper's commands would be.
	cgroup, label string
	threads       []threadFacts
}

// threadFacts are the per-thread lines of /proc/PID/task/TID/status:
// with the credentials (ids, groups, capabilities), which the helper must
// share with its client, for it resolves the client's policy (reading
// what the client may read) and starts the client's command with its
// own.
type threadFacts struct {
	state, seccomp, filters, nnp string
	creds                        string
}

// credLines are the status lines that make up threadFacts.creds.
var credLines = []string{"Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}

var nsNames = [4]string{"user", "mnt", "pid", "net"}

// Not in package syscall.
const (
	soPeerPidfd         = 77       // SO_PEERPIDFD
	oPath               = 0x200000 // O_PATH, the same on amd64 and arm64
	sysPidfdSendSignal  = 424      // the same number on every architecture
	readlinkBufferBytes = 64
)

var (
	selfOnce sync.Once
	self     *facts
	selfErr  error
)

// selfFacts is this process's own facts, read once: nothing it does later
// changes them (it installs no filter and joins no namespace). Its
// leader's are its threads' (all unconfined, or the peer check is moot).
func selfFacts() (*facts, error) {
	selfOnce.Do(func() {
		dir, err := syscall.Open("/proc/self", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			selfErr = &os.PathError{Op: "open", Path: "/proc/self", Err: err}
			return
		}
		defer syscall.Close(dir)
		self, selfErr = readFacts(dir, false)
		if selfErr == nil {
			self.uid = os.Geteuid()
		}
	})
	return self, selfErr
}

// Ready reads this process's own facts now, so that a helper that cannot
// fails at its start rather than refusing every client.
func Ready() error {
	_, err := selfFacts()
	return err
}

// readFacts reads a process's facts through an open /proc/PID directory:
// of every thread, or with allThreads false of the leader only.
func readFacts(dir int, allThreads bool) (*facts, error) {
	f := &facts{}
	for i, n := range nsNames {
		buf := make([]byte, readlinkBufferBytes)
		k, err := readlinkat(dir, "ns/"+n, buf)
		if err != nil {
			return nil, errors.New("reading ns/" + n + ": " + err.Error())
		}
		f.ns[i] = string(buf[:k])
	}
	var err error
	if f.cgroup, err = readOptional(dir, "cgroup"); err != nil {
		return nil, err
	}
	if f.label, err = readOptional(dir, "attr/current"); err != nil {
		return nil, err
	}
	if !allThreads {
		t, err := readThread(dir, "status")
		if err != nil {
			return nil, err
		}
		f.threads = []threadFacts{t}
		return f, nil
	}
	task, err := syscall.Openat(dir, "task", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.New("opening task: " + err.Error())
	}
	tf := os.NewFile(uintptr(task), "task")
	defer tf.Close()
	tids, err := tf.Readdirnames(-1)
	if err != nil {
		return nil, errors.New("listing task: " + err.Error())
	}
	if len(tids) == 0 {
		return nil, errors.New("process has no threads")
	}
	for _, tid := range tids {
		if _, err := strconv.Atoi(tid); err != nil {
			return nil, errors.New("odd task entry " + strconv.Quote(tid))
		}
		t, err := readThread(task, tid+"/status")
		if err != nil {
			return nil, err
		}
		f.threads = append(f.threads, t)
	}
	return f, nil
}

// readOptional reads a small /proc file, "" when the kernel has none
// (no security module answers attr/current).
func readOptional(dir int, name string) (string, error) {
	fd, err := syscall.Openat(dir, name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err == syscall.ENOENT {
		return "", nil
	}
	if err != nil {
		return "", errors.New("opening " + name + ": " + err.Error())
	}
	defer syscall.Close(fd)
	b, err := readAll(fd, 16<<10)
	if err == syscall.EINVAL || err == syscall.ENOPROTOOPT {
		return "", nil
	}
	if err != nil {
		return "", errors.New("reading " + name + ": " + err.Error())
	}
	return string(b), nil
}

func readlinkat(dir int, name string, buf []byte) (int, error) {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	n, _, errno := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func readThread(task int, name string) (threadFacts, error) {
	var t threadFacts
	fd, err := syscall.Openat(task, name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return t, errors.New("opening task/" + name + ": " + err.Error())
	}
	defer syscall.Close(fd)
	buf, err := readAll(fd, 4096)
	if err != nil {
		return t, errors.New("reading task/" + name + ": " + err.Error())
	}
	var seen int
	for line := range lines(buf) {
		k, v, ok := cut(line, ':')
		if !ok {
			continue
		}
		v = trimSpace(v)
		switch k {
		case "State":
			t.state, seen = v, seen|1
		case "NoNewPrivs":
			t.nnp, seen = v, seen|2
		case "Seccomp":
			t.seccomp, seen = v, seen|4
		case "Seccomp_filters":
			t.filters, seen = v, seen|8
		default:
			for i, c := range credLines {
				if k == c {
					t.creds += c + ":" + v + ";"
					seen |= 16 << i
				}
			}
		}
	}
	if want := 16<<len(credLines) - 1; seen != want {
		return t, errors.New("task/" + name + " lacks State, NoNewPrivs, Seccomp, Seccomp_filters or a credentials line")
	}
	return t, nil
}

// readAll reads fd to its end, at most max bytes.
func readAll(fd, max int) ([]byte, error) {
	buf := make([]byte, max)
	n := 0
	for n < len(buf) {
		k, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return buf[:n], nil
}

// Check authenticates the process at the other end of the unix socket fd
// (see the comment at the top of this file). It returns the peer's pid
// for messages. The helper checks every thread of a client; a client
// checks the helper's leader only (the helper has many threads; every
// thread of a sandboxed process, its leader included, inherited the
// filters at exec, and a leader that exited, leaving its status to a
// zombie, is refused).
func Check(fd int, allThreads bool) (int, error) {
	me, err := selfFacts()
	if err != nil {
		return 0, errors.New("reading our own facts: " + err.Error())
	}
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt(SO_PEERCRED)", err)
	}
	if int(cred.Uid) != me.uid {
		return 0, errors.New("peer runs as uid " + itoa(int(cred.Uid)) + ", not " + itoa(me.uid))
	}
	// The pidfd names the very process that connected (or listened):
	// unlike the pid, it cannot come to mean another process.
	pidfd, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, soPeerPidfd)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt(SO_PEERPIDFD)", err)
	}
	defer syscall.Close(pidfd)
	pid, err := pidfdPid(pidfd)
	if err != nil {
		return 0, err
	}
	if pid <= 0 || pid != int(cred.Pid) {
		// 0: not in our pid namespace (a sandbox's own); -1: gone.
		return 0, errors.New("peer pid " + itoa(pid) + " (SO_PEERCRED says " + itoa(int(cred.Pid)) + ") is not a live process of our pid namespace")
	}
	path := "/proc/" + itoa(pid)
	dir, err := syscall.Open(path, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(dir)
	peer, err := readFacts(dir, allThreads)
	if err != nil {
		return 0, errors.New("peer " + itoa(pid) + ": " + err.Error())
	}
	// Only now is it known that what was read is the peer's: if the
	// process is still alive, its pid was not reused while we read.
	if _, _, errno := syscall.Syscall6(sysPidfdSendSignal, uintptr(pidfd), 0, 0, 0, 0, 0); errno != 0 {
		return 0, errors.New("peer " + itoa(pid) + " ended while being checked: " + errno.Error())
	}
	if err := sameFacts(me, peer); err != nil {
		return 0, errors.New("peer " + itoa(pid) + " is not an unconfined process of this user: " + err.Error())
	}
	return pid, nil
}

// sameFacts says how peer differs from me, if it does.
func sameFacts(me, peer *facts) error {
	for i, n := range nsNames {
		if me.ns[i] != peer.ns[i] {
			return errors.New("another " + n + " namespace (" + peer.ns[i] + ", ours " + me.ns[i] + ")")
		}
	}
	if me.cgroup != peer.cgroup {
		return errors.New("another cgroup (" + trimSpace(peer.cgroup) + ", ours " + trimSpace(me.cgroup) + ")")
	}
	if me.label != peer.label {
		return errors.New("another security label (" + trimSpace(peer.label) + ", ours " + trimSpace(me.label) + ")")
	}
	want := me.threads[0]
	for _, t := range peer.threads {
		switch {
		case t.state == "" || t.state[0] == 'Z' || t.state[0] == 'X':
			return errors.New("a thread in state " + strconv.Quote(t.state))
		case t.seccomp != want.seccomp || t.filters != want.filters:
			return errors.New("a thread with seccomp " + t.seccomp + " and " + t.filters + " filters (ours " + want.seccomp + ", " + want.filters + ")")
		case t.nnp != want.nnp:
			return errors.New("a thread with NoNewPrivs " + t.nnp + " (ours " + want.nnp + ")")
		case t.creds != want.creds:
			return errors.New("a thread with other ids, groups or capabilities (" + t.creds + "; ours " + want.creds + ")")
		}
	}
	return nil
}

// pidfdPid is the pid a pidfd refers to, in our pid namespace, from its
// fdinfo: -1 when the process has ended, 0 when it is not visible here.
func pidfdPid(pidfd int) (int, error) {
	path := "/proc/self/fdinfo/" + itoa(pidfd)
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	b, err := readAll(fd, 4096)
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	for line := range lines(b) {
		if k, v, ok := cut(line, ':'); ok && k == "Pid" {
			return strconv.Atoi(trimSpace(v))
		}
	}
	return 0, errors.New(path + ": no Pid line")
}

// FileID is the identity of the file at path (the executable a client and
// the helper run, compared so that they are the same build): device,
// inode, size and times, so that a file rewritten in place differs too.
func FileID(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return strconv.FormatUint(st.Dev, 10) + ":" + strconv.FormatUint(st.Ino, 10) + ":" + strconv.FormatInt(st.Size, 10) + ":" +
		strconv.FormatInt(st.Mtim.Sec, 10) + "." + strconv.FormatInt(st.Mtim.Nsec, 10) + ":" +
		strconv.FormatInt(st.Ctim.Sec, 10) + "." + strconv.FormatInt(st.Ctim.Nsec, 10), nil
}

// Binary identifies the executable this process runs (the open image,
// even if the path has since been replaced).
func Binary() (string, error) { return FileID("/proc/self/exe") }

// Umask reads the umask without changing it (umask(2) can only set it,
// and a set-and-restore races with other threads making files).
func Umask() (int, error) {
	fd, err := syscall.Open("/proc/self/status", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: "/proc/self/status", Err: err}
	}
	defer syscall.Close(fd)
	b, err := readAll(fd, 16<<10)
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: "/proc/self/status", Err: err}
	}
	for line := range lines(b) {
		if k, v, ok := cut(line, ':'); ok && k == "Umask" {
			m, err := strconv.ParseInt(trimSpace(v), 8, 32)
			return int(m), err
		}
	}
	return 0, errors.New("/proc/self/status has no Umask line")
}

// RlimitCount is RLIM_NLIMITS on Linux.
const RlimitCount = 16

// Rlimits are this process's resource limits, as a command it started
// would inherit them. RLIMIT_NOFILE is as Go's runtime left it (the soft
// limit raised to the hard one less one): the soft limit the process
// started with, which Go restores for its children, cannot be read back,
// so two processes that differ only there compare equal.
func Rlimits() ([][2]uint64, error) {
	out := make([][2]uint64, RlimitCount)
	for r := range RlimitCount {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(r, &l); err != nil {
			return nil, os.NewSyscallError("getrlimit", err)
		}
		out[r] = [2]uint64{l.Cur, l.Max}
	}
	return out, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// lines yields b's lines, without their newlines.
func lines(b []byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for len(b) > 0 {
			i := 0
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if !yield(string(b[:i])) {
				return
			}
			if i == len(b) {
				return
			}
			b = b[i+1:]
		}
	}
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// CheckDir refuses a helper directory that is not a real directory of
// ours with mode 0700: the helper's, before it listens there, and its
// clients', before they connect.
func CheckDir(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o777 != 0o700 {
		return errors.New(dir + ": not a directory of uid " + strconv.Itoa(os.Geteuid()) + " with mode 0700 (mode " +
			strconv.FormatUint(uint64(st.Mode), 8) + ", uid " + strconv.FormatUint(uint64(st.Uid), 10) + "); remove it")
	}
	return nil
}
