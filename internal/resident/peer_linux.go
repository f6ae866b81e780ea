package resident

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
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

// procFacts is what tells a process apart from a sandboxed one.
type procFacts struct {
	uid     int
	ns      [4]string // user, mnt, pid, net links, e.g. "user:[4026531837]"
	threads []threadFacts
}

// threadFacts are the per-thread lines of /proc/PID/task/TID/status.
type threadFacts struct {
	state, seccomp, filters, nnp string
}

var nsNames = [4]string{"user", "mnt", "pid", "net"}

var (
	selfOnce sync.Once
	self     *procFacts
	selfErr  error
)

// selfFacts is this process's own facts, read once: nothing it does later
// changes them (it installs no filter and joins no namespace). Its
// leader's are its threads' (all unconfined, or the peer check is moot).
func selfFacts() (*procFacts, error) {
	selfOnce.Do(func() {
		dir, err := unix.Open("/proc/self", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			selfErr = &os.PathError{Op: "open", Path: "/proc/self", Err: err}
			return
		}
		defer unix.Close(dir)
		self, selfErr = readFacts(dir, false)
		if selfErr == nil {
			self.uid = os.Geteuid()
		}
	})
	return self, selfErr
}

// readFacts reads a process's facts through an open /proc/PID directory:
// of every thread, or with allThreads false of the leader only.
func readFacts(dir int, allThreads bool) (*procFacts, error) {
	f := &procFacts{}
	for i, n := range nsNames {
		buf := make([]byte, 64)
		k, err := unix.Readlinkat(dir, "ns/"+n, buf)
		if err != nil {
			return nil, fmt.Errorf("reading ns/%s: %w", n, err)
		}
		f.ns[i] = string(buf[:k])
	}
	if !allThreads {
		t, err := readThread(dir, "status")
		if err != nil {
			return nil, err
		}
		f.threads = []threadFacts{t}
		return f, nil
	}
	task, err := unix.Openat(dir, "task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening task: %w", err)
	}
	tf := os.NewFile(uintptr(task), "task")
	defer tf.Close()
	tids, err := tf.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing task: %w", err)
	}
	if len(tids) == 0 {
		return nil, errors.New("process has no threads")
	}
	for _, tid := range tids {
		if _, err := strconv.Atoi(tid); err != nil {
			return nil, fmt.Errorf("odd task entry %q", tid)
		}
		t, err := readThread(task, tid+"/status")
		if err != nil {
			return nil, err
		}
		f.threads = append(f.threads, t)
	}
	return f, nil
}

func readThread(task int, name string) (threadFacts, error) {
	var t threadFacts
	fd, err := unix.Openat(task, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return t, fmt.Errorf("opening task/%s: %w", name, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err != nil {
			return t, fmt.Errorf("reading task/%s: %w", name, err)
		}
		if k == 0 {
			break
		}
		n += k
	}
	var seen int
	for _, line := range bytes.Split(buf[:n], []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch string(k) {
		case "State":
			t.state, seen = string(v), seen|1
		case "NoNewPrivs":
			t.nnp, seen = string(v), seen|2
		case "Seccomp":
			t.seccomp, seen = string(v), seen|4
		case "Seccomp_filters":
			t.filters, seen = string(v), seen|8
		}
	}
	if seen != 15 {
		return t, fmt.Errorf("task/%s lacks State, NoNewPrivs, Seccomp or Seccomp_filters", name)
	}
	return t, nil
}

// checkPeer authenticates the process at the other end of the unix socket
// fd (see the comment at the top of this file). It returns the peer's pid
// for messages. The helper checks every thread of a CLI; a CLI checks the
// helper's leader only (the helper has many threads; every thread of a
// sandboxed process, its leader included, inherited the filters at exec,
// and a leader that exited, leaving its status to a zombie, is refused).
func checkPeer(fd int, allThreads bool) (int, error) {
	me, err := selfFacts()
	if err != nil {
		return 0, fmt.Errorf("reading our own facts: %w", err)
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt(SO_PEERCRED)", err)
	}
	if int(cred.Uid) != me.uid {
		return 0, fmt.Errorf("peer runs as uid %d, not %d", cred.Uid, me.uid)
	}
	// The pidfd names the very process that connected (or listened):
	// unlike the pid, it cannot come to mean another process.
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt(SO_PEERPIDFD)", err)
	}
	defer unix.Close(pidfd)
	pid, err := pidfdPid(pidfd)
	if err != nil {
		return 0, err
	}
	if pid <= 0 || pid != int(cred.Pid) {
		// 0: not in our pid namespace (a sandbox's own); -1: gone.
		return 0, fmt.Errorf("peer pid %d (SO_PEERCRED says %d) is not a live process of our pid namespace", pid, cred.Pid)
	}
	path := "/proc/" + strconv.Itoa(pid)
	dir, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(dir)
	peer, err := readFacts(dir, allThreads)
	if err != nil {
		return 0, fmt.Errorf("peer %d: %w", pid, err)
	}
	// Only now is it known that what was read is the peer's: if the
	// process is still alive, its pid was not reused while we read.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return 0, fmt.Errorf("peer %d ended while being checked: %w", pid, err)
	}
	if err := sameFacts(me, peer); err != nil {
		return 0, fmt.Errorf("peer %d is not an unconfined process of this user: %w", pid, err)
	}
	return pid, nil
}

// sameFacts says how peer differs from me, if it does.
func sameFacts(me, peer *procFacts) error {
	for i, n := range nsNames {
		if me.ns[i] != peer.ns[i] {
			return fmt.Errorf("another %s namespace (%s, ours %s)", n, peer.ns[i], me.ns[i])
		}
	}
	want := me.threads[0]
	for _, t := range peer.threads {
		switch {
		case t.state == "" || t.state[0] == 'Z' || t.state[0] == 'X':
			return fmt.Errorf("a thread in state %q", t.state)
		case t.seccomp != want.seccomp || t.filters != want.filters:
			return fmt.Errorf("a thread with seccomp %s and %s filters (ours %s, %s)", t.seccomp, t.filters, want.seccomp, want.filters)
		case t.nnp != want.nnp:
			return fmt.Errorf("a thread with NoNewPrivs %s (ours %s)", t.nnp, want.nnp)
		}
	}
	return nil
}

// pidfdPid is the pid a pidfd refers to, in our pid namespace, from its
// fdinfo: -1 when the process has ended, 0 when it is not visible here.
func pidfdPid(pidfd int) (int, error) {
	path := "/proc/self/fdinfo/" + strconv.Itoa(pidfd)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
			return strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	return 0, fmt.Errorf("%s: no Pid line", path)
}
