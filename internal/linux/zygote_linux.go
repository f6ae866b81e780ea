package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/lookpath"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/linux/unixsock"
)

// A session's zygote is the init stage in "session" mode: PID 1 of the
// session's pid namespace, in the session's user, mount, network, IPC and
// UTS namespaces, with the filesystem view built once. It then serves
// requests on the control socket (controlFD), a socketpair end that only
// this process holds: it is close-on-exec, never passed to a command, and
// the zygote is not dumpable, so no command can reach it through
// /proc/1/fd either.
//
// Each command is forked from a thread of its own, locked for the
// command's whole life and prepared before its request arrives (see
// worker): no_new_privs,
// locked securebits, empty bounding and ambient sets, only CAP_SYS_ADMIN
// left in the effective set (creating the command's pid namespace needs
// it; exec drops it), a Landlock domain of its own, the seccomp filter and
// the unix socket supervisor. These are all per-thread attributes, so the
// zygote's other threads keep serving the session, and every command gets
// fresh state (a domain of its own, so commands cannot ptrace, signal or
// read /proc/PID/mem of one another). The command is PID 1 of a fresh pid
// namespace: when it ends, the kernel kills everything it left behind.
// When the thread's goroutine returns without unlocking, the Go runtime
// destroys the thread, so a restricted thread is never reused.
const controlFD = 5

// zreq is a request on the control socket. A start request carries the
// command's stdin, stdout and stderr as SCM_RIGHTS, and, when the request
// would not fit in one packet, a fourth fd: a memfd holding it.
type zreq struct {
	Op   string   `json:"op"` // "start", "signal", "kill", "big"
	ID   uint64   `json:"id"`
	Path string   `json:"path,omitempty"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"` // "" means the session's workspace
	Sig  int      `json:"sig,omitempty"`
}

// zresp answers a request: one Started (or Error) per start, then one
// Exited. With an allow-list, Started carries the command's two proxy
// listeners as SCM_RIGHTS (HTTP, then SOCKS5; see commandListeners).
type zresp struct {
	ID      uint64 `json:"id"`
	Started bool   `json:"started,omitempty"`
	Exited  bool   `json:"exited,omitempty"`
	Status  int    `json:"status,omitempty"`
	Signal  int    `json:"signal,omitempty"`
	Error   string `json:"error,omitempty"`
	Code    int    `json:"code,omitempty"`

	fds []int // received with the answer (the client's side only)
}

// maxPacket bounds a control message; larger start requests travel in a
// memfd. It stays below the default socket buffer (net.core.wmem_default).
const maxPacket = 64 << 10

// maxBigRequest bounds a start request passed in a memfd (argv and the
// environment together; the kernel's own limit for execve is near this).
const maxBigRequest = 8 << 20

type zygote struct {
	spec   *Spec
	prog   []bpf.RawInstruction
	sendMu sync.Mutex

	mu   sync.Mutex
	cmds map[uint64]*zcmd

	// jobs hands a start request to the thread prepared for it.
	jobs chan job
}

// job is a start request, the command's stdio and, with an allow-list,
// its proxy listeners and their ports.
type job struct {
	r     zreq
	stdio [3]int
	proxy []int
	ports []int
}

// zcmd is a running command. pidfd names it without the race of a
// reused pid; pid is its number in the zygote's pid namespace.
type zcmd struct {
	pid, pidfd int
	// as is the signal the command is reported killed by when the zygote
	// had to kill it with SIGKILL in that signal's place (see deliver).
	as syscall.Signal
}

// runZygote serves the session until the client closes its end of the
// control socket (or dies); then it exits, and with PID 1 every process of
// the session dies. It never returns.
func runZygote(spec *Spec, report func(message)) {
	fail := func(err error) {
		report(message{Error: err.Error(), Code: exitcode.SandboxFailure})
		os.Exit(exitcode.SandboxFailure)
	}
	if spec.Degraded {
		fail(errors.New("sessions need a pid namespace; degraded runs start each command on its own"))
	}
	// Nobody, not even a command running as the same uid, may read our
	// memory or our fds (the control socket) through /proc/1.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(&os.SyscallError{Syscall: "prctl(PR_SET_DUMPABLE)", Err: err})
	}
	// The filter is the same for every command: build it once.
	prog, err := seccomp.BuildNativeProgram(seccompOptions(spec))
	if err != nil {
		fail(fmt.Errorf("seccomp: %w", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(controlFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		fail(fmt.Errorf("session control socket missing (fd %d): %v", controlFD, err))
	}
	if spec.Landlock {
		// Every thread of the zygote first, with the commands'
		// filesystem rules and no scoping, as a lone run's init does
		// (landlockWalls): its threads that serve the session (signals,
		// the supervisors' connects) then write nowhere a command
		// cannot, and each command's own domain nests inside this one,
		// so no command can reach these threads (Landlock lets a domain
		// reach only itself and its descendants). Threads made later
		// inherit it from the runtime's template thread.
		if _, err := landlock.Restrict(landlock.Config{WritableRoots: landlockRoots(spec), UnixConnect: true}); err != nil {
			fail(fmt.Errorf("landlock on the zygote's threads: %w", err))
		}
	}
	z := &zygote{spec: spec, prog: prog, cmds: map[uint64]*zcmd{}, jobs: make(chan job)}
	go z.worker()
	report(message{Started: true})
	unix.Close(statusFD)
	z.serve()
	os.Exit(0)
}

// seccompOptions is the filter of a session's commands: that of a lone
// run (see installSeccomp), plus CLONE_NEWPID for the zygote's own fork.
func seccompOptions(spec *Spec) seccomp.Options {
	return seccomp.Options{
		DenyInetSockets:        spec.DenyInetSockets,
		TCPOnly:                len(spec.ProxyAddrs) > 0,
		RestrictSocketFamilies: !spec.Network,
		DenyIPC:                spec.Degraded,
		AllowNewPID:            true,
	}
}

// serve reads requests until the control socket ends.
func (z *zygote) serve() {
	buf := make([]byte, maxPacket)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(controlFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return // the client is gone: so is the session
		}
		fds := parseRights(oob[:oobn])
		var r zreq
		if err := json.Unmarshal(buf[:n], &r); err != nil {
			closeAll(fds)
			continue
		}
		switch r.Op {
		case "start", "big":
			if r.Op == "big" {
				if len(fds) != 4 {
					closeAll(fds)
					z.send(zresp{ID: r.ID, Error: "session: malformed request", Code: exitcode.SandboxFailure})
					continue
				}
				big, err := readMemfd(fds[3])
				unix.Close(fds[3])
				fds = fds[:3]
				if err == nil {
					err = json.Unmarshal(big, &r)
				}
				if err != nil {
					closeAll(fds)
					z.send(zresp{ID: r.ID, Error: fmt.Sprintf("session: reading request: %v", err), Code: exitcode.SandboxFailure})
					continue
				}
			}
			if len(fds) != 3 || len(r.Argv) == 0 || r.Path == "" {
				closeAll(fds)
				z.send(zresp{ID: r.ID, Error: "session: malformed request", Code: exitcode.SandboxFailure})
				continue
			}
			// Not from this goroutine: kill requests must not wait
			// for the next thread to be ready.
			stdio := [3]int{fds[0], fds[1], fds[2]}
			if err := reopenDevices(&stdio); err != nil {
				closeAll(stdio[:])
				z.send(zresp{ID: r.ID, Error: fmt.Sprintf("session: %v", err), Code: exitcode.SandboxFailure})
				continue
			}
			j := job{r: r, stdio: stdio}
			if z.spec.Proxy {
				var err error
				if j.proxy, j.ports, err = commandListeners(); err != nil {
					closeAll(stdio[:])
					z.send(zresp{ID: r.ID, Error: fmt.Sprintf("session: the command's proxy listeners: %v", err), Code: exitcode.SandboxFailure})
					continue
				}
			}
			go func(j job) { z.jobs <- j }(j)
		case "signal", "kill":
			closeAll(fds)
			sig := syscall.SIGKILL
			if r.Op == "signal" {
				sig = syscall.Signal(r.Sig)
			}
			z.mu.Lock()
			if c := z.cmds[r.ID]; c != nil {
				z.deliver(c, sig)
			}
			z.mu.Unlock()
		default:
			closeAll(fds)
		}
	}
}

func (z *zygote) send(r zresp) { z.sendFDs(r, nil) }

// sendFDs sends r with fds as SCM_RIGHTS.
func (z *zygote) sendFDs(r zresp, fds []int) {
	b, _ := json.Marshal(r)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	z.sendMu.Lock()
	defer z.sendMu.Unlock()
	for {
		err := unix.Sendmsg(controlFD, b, oob, nil, unix.MSG_NOSIGNAL)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// worker prepares a thread of its own for the next command, waits for
// that command's request, forks it and waits for it there. Preparing
// before the request arrives takes the restrictions off the command's
// start-up path; the thread is as fresh as if it had been made for the
// request, and serves only it. The goroutine never unlocks its thread:
// when it returns, the thread, with the restrictions it carries, is
// destroyed.
func (z *zygote) worker() {
	runtime.LockOSThread()
	sup, perr := z.prepare()
	j := <-z.jobs
	r, stdio := j.r, j.stdio
	pid, pidfd, code, err := 0, -1, exitcode.SandboxFailure, perr
	if err == nil {
		pid, pidfd, code, err = z.fork(r, stdio, j.ports)
	}
	closeAll(stdio[:])
	if err != nil {
		closeAll(j.proxy)
		z.send(zresp{ID: r.ID, Error: err.Error(), Code: code})
		go z.worker()
		return
	}
	c := &zcmd{pid: pid, pidfd: pidfd}
	z.mu.Lock()
	z.cmds[r.ID] = c
	z.mu.Unlock()
	// The listeners go to agentbox with the answer, and the zygote keeps
	// no copy: agentbox's closing them when the command ends is their
	// end (the command never had them: they are close-on-exec).
	z.sendFDs(zresp{ID: r.ID, Started: true}, j.proxy)
	closeAll(j.proxy)
	// The next command's thread, now that this one is started: preparing
	// it earlier would compete for the CPU with this start.
	go z.worker()

	wait := unix.Wait4
	if sup != nil {
		wait = sup.Wait4
	}
	var ws unix.WaitStatus
	for {
		_, err = wait(pid, &ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	z.mu.Lock()
	delete(z.cmds, r.ID)
	as := c.as
	unix.Close(c.pidfd)
	z.mu.Unlock()
	m := zresp{ID: r.ID, Exited: true}
	switch {
	case err != nil:
		m.Error, m.Code = fmt.Sprintf("waiting for the command: %v", err), exitcode.SandboxFailure
	case ws.Signaled() && as != 0 && ws.Signal() == syscall.SIGKILL:
		m.Signal = int(as)
	case ws.Signaled():
		m.Signal = int(ws.Signal())
	default:
		m.Status = ws.ExitStatus()
	}
	z.send(m)
}

// prepare restricts the calling (locked) thread, which the command will
// be forked from. The order is the kernel's: no_new_privs first (Landlock and seccomp
// need it), securebits while CAP_SETPCAP is still held, then the bounding
// and ambient sets, then the capability sets themselves, Landlock, and
// seccomp last but one (its filter is what the command inherits); the unix
// socket supervisor's filter goes after the main one, which must not be
// installed with TSYNC on top of it.
func (z *zygote) prepare() (*unixsock.Supervisor, error) {
	spec := z.spec
	if err := thisThread(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return nil, &os.SyscallError{Syscall: "prctl(PR_SET_NO_NEW_PRIVS)", Err: err}
	}
	if err := keepOnlyNewPIDCap(); err != nil {
		return nil, err
	}
	if spec.Landlock {
		if err := restrictLandlock(spec); err != nil {
			return nil, err
		}
	}
	if spec.Seccomp {
		if err := seccomp.InstallThread(z.prog); err != nil {
			return nil, fmt.Errorf("seccomp: %w", err)
		}
	}
	if spec.MediateUnixConnect {
		sup, err := unixsock.Start(unixMediation(spec))
		if err != nil {
			return nil, fmt.Errorf("unix socket mediation: %w", err)
		}
		return sup, nil
	}
	return nil, nil
}

// fork starts the command from the calling, prepared thread. ports, with
// an allow-list, are those of the command's own proxy listeners.
func (z *zygote) fork(r zreq, stdio [3]int, ports []int) (pid, pidfd, code int, err error) {
	spec := z.spec
	fail := func(code int, err error) (int, int, int, error) {
		return 0, -1, code, err
	}
	// The session's own variables (the tool caches' private
	// directories, and fallbacks chosen while the root was built) win
	// over the caller's, as in a lone run.
	env := r.Env
	for _, kv := range spec.Env {
		env = replaceEnv(env, kv)
	}
	if len(ports) == 2 {
		// As in a lone run, the proxy variables win over the caller's.
		env = withProxyEnv(env, loopbackAddrs(ports))
	}
	dir := spec.Cwd
	if r.Dir != "" {
		dir = r.Dir
	}
	path, code, err := lookpath.FindIn(r.Path, lookpath.Env(env), dir)
	if err != nil {
		return fail(code, err)
	}
	pidfd = -1
	pid, err = syscall.ForkExec(path, r.Argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys: &syscall.SysProcAttr{
			// Its own pid namespace: the command is its PID 1, and
			// whatever it leaves behind dies with it.
			Cloneflags: unix.CLONE_NEWPID,
			// No controlling terminal: no TIOCSTI into the caller's.
			Setsid: true,
			// If this thread (or the zygote) dies, so does the command.
			Pdeathsig: syscall.SIGKILL,
			PidFD:     &pidfd,
		},
	})
	if err != nil {
		code := exitcode.SandboxFailure
		switch {
		case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
			code = exitcode.NotExecutable
		case errors.Is(err, os.ErrNotExist):
			code = exitcode.NotFound
		}
		return fail(code, fmt.Errorf("starting %s: %w", r.Argv[0], err))
	}
	return pid, pidfd, 0, nil
}

// keepOnlyNewPIDCap leaves this thread CAP_SYS_ADMIN in its effective and
// permitted sets and nothing else anywhere: clone(CLONE_NEWPID) needs it,
// and exec takes it away (locked SECBIT_NOROOT grants root nothing, an
// empty bounding set lets no file capability in, ambient is empty and
// cannot be raised).
func keepOnlyNewPIDCap() error {
	if err := thisThread(unix.PR_SET_SECUREBITS, lockedSecurebits, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_SET_SECUREBITS)", Err: err}
	}
	for c := 0; c <= 63; c++ {
		err := thisThread(unix.PR_CAPBSET_DROP, uintptr(c), 0)
		if err == unix.EINVAL {
			break
		}
		if err != nil {
			return &os.SyscallError{Syscall: fmt.Sprintf("prctl(PR_CAPBSET_DROP, %d)", c), Err: err}
		}
	}
	if err := thisThread(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_CAP_AMBIENT_CLEAR_ALL)", Err: err}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[0].Effective = 1 << unix.CAP_SYS_ADMIN
	data[0].Permitted = 1 << unix.CAP_SYS_ADMIN
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return &os.SyscallError{Syscall: "capset", Err: errno}
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &os.SyscallError{Syscall: "capget", Err: err}
	}
	if data[0].Inheritable|data[1].Inheritable != 0 || data[0].Permitted != 1<<unix.CAP_SYS_ADMIN || data[1].Permitted != 0 {
		return fmt.Errorf("capabilities other than CAP_SYS_ADMIN remain on the spawning thread: %+v", data)
	}
	return nil
}

// landlockRoots are the writable roots for Landlock: the policy's, and
// the session's own /dev/shm tmpfs.
func landlockRoots(spec *Spec) []string {
	return append(append([]string{}, spec.WritableRoots...), "/dev/shm")
}

// restrictLandlock gives this thread (and so the command) a Landlock
// domain of its own, nested in the zygote's, with the rules of a lone
// run's command (see landlockWalls).
func restrictLandlock(spec *Spec) error {
	abi, _ := landlock.ABI()
	scoped := abi >= 6
	if _, err := landlock.Restrict(landlock.Config{
		ThisThread:        true,
		WritableRoots:     landlockRoots(spec),
		ScopeAbstractUnix: scoped,
		ScopeSignals:      scoped,
	}); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// deliver sends sig to a command that is PID 1 of its pid namespace. The
// kernel drops signals to a namespace's init that it does not handle
// (SIGKILL and SIGSTOP from outside excepted), so a signal whose default
// action would end the command is replaced by SIGKILL, and the command is
// reported killed by sig; a default stop becomes SIGSTOP. A handler
// installed between the check and the send sees SIGKILL instead: a small
// race, in the direction of ending the command. Called with z.mu held.
func (z *zygote) deliver(c *zcmd, sig syscall.Signal) {
	if sig == syscall.SIGKILL || sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
		kill(c, sig)
		return
	}
	caught, ignored := sigMasks(c.pid)
	bit := uint64(1) << (uint(sig) - 1)
	switch {
	case caught&bit != 0:
		kill(c, sig)
	case ignored&bit != 0:
		return
	default:
		switch sig {
		case syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
			return // default action: ignore
		case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
			kill(c, syscall.SIGSTOP)
			return
		}
		c.as = sig
		kill(c, syscall.SIGKILL)
		return
	}
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		// A stopped command would hold a terminating signal pending.
		kill(c, syscall.SIGCONT)
	}
}

func kill(c *zcmd, sig syscall.Signal) {
	unix.PidfdSendSignal(c.pidfd, sig, nil, 0)
}

// sigMasks reads the caught and ignored signal masks of pid.
func sigMasks(pid int) (caught, ignored uint64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			caught, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		} else if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			ignored, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return caught, ignored
}

// reopenDevices replaces each of a command's streams that is a device of
// the sandbox's /dev (/dev/null above all: the caller's is the host's
// node, on a writable mount) by the same device opened in the sandbox.
func reopenDevices(stdio *[3]int) error {
	for _, fd := range stdio {
		f, err := reopenDevice(fd)
		if err != nil {
			return err
		}
		if f != nil {
			// In place, so the number stays ours to close.
			err := unix.Dup3(int(f.Fd()), fd, unix.O_CLOEXEC)
			f.Close()
			if err != nil {
				return os.NewSyscallError("dup3", err)
			}
		}
	}
	return nil
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func readMemfd(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size > maxBigRequest || st.Size < 0 {
		return nil, fmt.Errorf("request of %d bytes exceeds %d", st.Size, maxBigRequest)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("short request")
		}
		off += n
	}
	return b, nil
}
