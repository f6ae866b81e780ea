package stage

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/pid1"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/linux/unixsock"
	"github.com/agentbox/agentbox/internal/lookpath"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
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
// worker), which is also the thread that reads that request, so that
// starting a command involves no hand-over between threads: no_new_privs,
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

type zygote struct {
	sp   *spec.Spec
	prog []bpf.RawInstruction
	// rules is every command's Landlock ruleset, built once; each
	// command's thread gets a domain of its own from it (nil without
	// Landlock).
	rules *landlock.Ruleset

	mu   sync.Mutex
	cmds map[uint64]*zcmd

	// ctl hands the signal and kill requests that a command's thread
	// read to the zygote's main goroutine: a command's thread has a
	// Landlock domain of its own, from which the other commands are out
	// of reach, so only the zygote's own threads signal commands.
	ctl chan spec.Request
	// end is closed when the control socket ends: the client is gone,
	// and so is the session.
	end chan struct{}
	// listen asks the main goroutine for a command's proxy listeners
	// (with an allow-list).
	listen chan chan listeners

	// owners is the table of the name server's clients (with
	// Spec.Net.Resolver), in which each command's supervisor records its
	// sockets.
	owners *spec.PortOwners

	// buf and oob receive requests. Exactly one thread reads the
	// control socket at a time (the next command's, see worker), and it
	// is done with them before the following one starts reading.
	buf, oob []byte

	// mounter is the zygote's end of the socket to the session's
	// mounter (-1 without one), which one command's thread at a time
	// uses, holding mountMu.
	mounter int
	mountMu sync.Mutex
	// lateMasks are the masks the mounter made for a later command (a
	// tmpfs each, see maskLate): path to the device of its file system
	// (see ensureHidden).
	lateMu    sync.Mutex
	lateMasks map[string]uint64
	// hidden counts the opens of the masks, for each command's report
	// (nil without one).
	hidden *hiddenReads
}

// listeners are a command's proxy listeners and their ports.
type listeners struct {
	fds, ports []int
	err        error
}

// job is a start request, the command's stdio, its reply socket and,
// with an allow-list, its proxy listeners and their ports.
type job struct {
	r     spec.Request
	stdio [3]int
	reply int
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
func runZygote(sp *spec.Spec, report func(spec.Message)) {
	fail := func(err error) {
		report(spec.Message{Error: err.Error(), Code: exitcode.SandboxFailure})
		os.Exit(exitcode.SandboxFailure)
	}
	if sp.Degraded.On {
		fail(errors.New("sessions need a pid namespace; degraded runs start each command on its own"))
	}
	// Nobody, not even a command running as the same uid, may read our
	// memory or our fds (the control socket) through /proc/1: the first
	// step of the hardening (harden_linux.go), for the whole zygote.
	if err := notDumpable(); err != nil {
		fail(err)
	}
	// The filter is the same for every command: build it once.
	prog, err := seccomp.BuildNativeProgram(seccompOptions(sp))
	if err != nil {
		fail(fmt.Errorf("seccomp: %w", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(spec.ControlFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		fail(fmt.Errorf("session control socket missing (fd %d): %v", spec.ControlFD, err))
	}
	// Before Landlock, which would refuse it every mount: the process
	// that binds each command's placeholders (mounter_linux.go).
	mounter := -1
	if sp.Session.BindPerCommand {
		if mounter, err = startMounter(); err != nil {
			fail(err)
		}
	}
	if sp.Walls.Landlock {
		// Every thread of the zygote first, with the commands'
		// filesystem rules and no scoping, as a lone run's init does
		// (landlockWalls): its threads that serve the session (signals,
		// the supervisors' connects) then write nowhere a command
		// cannot, and each command's own domain nests inside this one,
		// so no command can reach these threads (Landlock lets a domain
		// reach only itself and its descendants). Threads made later
		// inherit it from the runtime's template thread.
		if _, err := landlock.Restrict(landlock.Config{WritableRoots: landlockRoots(sp), UnixConnect: true}); err != nil {
			fail(fmt.Errorf("landlock on the zygote's threads: %w", err))
		}
	}
	// Every command's Landlock rules, those of a lone run's command (see
	// applyWalls), built once: each command's thread is then restricted
	// by them in a domain of its own, nested in the zygote's.
	var rules *landlock.Ruleset
	if sp.Walls.Landlock {
		abi, _ := landlock.ABI()
		scoped := abi >= 6
		rules, err = landlock.NewRuleset(landlock.Config{
			WritableRoots:     landlockRoots(sp),
			ScopeAbstractUnix: scoped,
			ScopeSignals:      scoped,
		})
		if err != nil {
			fail(err)
		}
	}
	z := &zygote{
		sp: sp, prog: prog, rules: rules, cmds: map[uint64]*zcmd{},
		hidden: watchHiddenFor(sp),
		ctl:    make(chan spec.Request), end: make(chan struct{}), listen: make(chan chan listeners),
		buf: make([]byte, spec.MaxPacket), oob: make([]byte, unix.CmsgSpace((5+spec.MaxHeld)*4)),
		mounter: mounter,
	}
	if sp.Session.PortOwnersFD > 0 {
		if z.owners, err = spec.MapPortOwners(sp.Session.PortOwnersFD); err != nil {
			fail(err)
		}
		z.owners.Watched = append([]netip.AddrPort{spec.ResolverAddr}, sp.Session.ProxyAddrs...)
		z.owners.Transparent = sp.Net.Transparent
		unix.Close(sp.Session.PortOwnersFD)
	}
	go z.worker()
	// The status pipe stays open: it belongs to the *os.File in
	// RunInit's report, whose finalizer closes fd 4 once that is
	// garbage. Closing the number here let that finalizer close
	// whatever reused it later: a running command's reply socket or
	// pidfd (seen as "the session's sandbox ended" under load).
	report(spec.Message{Started: true})
	for {
		select {
		case r := <-z.ctl:
			sig := syscall.SIGKILL
			if r.Op == "signal" {
				sig = syscall.Signal(r.Sig)
			}
			z.mu.Lock()
			if c := z.cmds[r.ID]; c != nil {
				z.deliver(c, sig)
			}
			z.mu.Unlock()
		case ch := <-z.listen:
			var l listeners
			l.fds, l.ports, l.err = commandListeners()
			ch <- l
		case <-z.end:
			os.Exit(0)
		}
	}
}

// seccompOptions is the filter of a session's commands: that of a lone
// run (see installSeccomp), plus CLONE_NEWPID for the zygote's own fork.
func seccompOptions(sp *spec.Spec) seccomp.Options {
	return seccomp.Options{
		DenyInetSockets:        sp.Walls.DenyInetSockets,
		TCPOnly:                len(sp.Degraded.ProxyAddrs) > 0,
		RestrictSocketFamilies: !sp.Net.Network,
		DenyIPC:                sp.Degraded.On,
		AllowNewPID:            true,
	}
}

// next reads the control socket until a start request arrives, and
// returns it; it hands every other request to the main goroutine (ctl).
// It returns false when the control socket has ended. A request that
// cannot be served is answered on its reply socket, if it has one.
func (z *zygote) next() (job, bool) {
	for {
		n, oobn, flags, _, err := unix.Recvmsg(spec.ControlFD, z.buf, z.oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			close(z.end) // the client is gone: so is the session
			return job{}, false
		}
		fds := scm.Rights(z.oob[:oobn])
		var r spec.Request
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || r.Decode(z.buf[:n]) != nil {
			// A truncated request lost descriptors (a placeholder's
			// among them): never served, and without its reply
			// socket never answered; the client's wait ends with
			// the session.
			scm.CloseAll(fds)
			continue
		}
		switch r.Op {
		case "start", "big":
			if j, ok := z.startJob(r, fds); ok {
				return j, true
			}
		case "signal", "kill":
			scm.CloseAll(fds)
			z.ctl <- r
		default:
			scm.CloseAll(fds)
		}
	}
}

// startJob checks a start request and its fds; a request it cannot serve
// is answered (when it has a reply socket) and its fds closed.
func (z *zygote) startJob(r spec.Request, fds []int) (job, bool) {
	want := 4 + len(r.Held)
	if r.Op == "big" {
		want++
	}
	if len(fds) != want || len(fds) < 4 {
		scm.CloseAll(fds)
		return job{}, false // no reply socket to answer on
	}
	j := job{stdio: [3]int{fds[0], fds[1], fds[2]}, reply: fds[3]}
	held := fds[4 : 4+len(r.Held)]
	defer scm.CloseAll(held)
	fail := func(msg string) (job, bool) {
		sendReply(j.reply, spec.Answer{ID: r.ID, Error: msg, Code: exitcode.SandboxFailure})
		scm.CloseAll(j.stdio[:])
		unix.Close(j.reply)
		return job{}, false
	}
	if r.Op == "big" {
		memfd := fds[len(fds)-1]
		heldPaths := r.Held
		big, err := readMemfd(memfd)
		unix.Close(memfd)
		if err == nil {
			err = r.Decode(big)
		}
		if err != nil {
			return fail(fmt.Sprintf("session: reading request: %v", err))
		}
		r.Held = heldPaths
	}
	if len(r.Argv) == 0 || r.Path == "" {
		return fail("session: malformed request")
	}
	if err := reopenDevices(&j.stdio); err != nil {
		return fail(fmt.Sprintf("session: %v", err))
	}
	// The placeholders the host made for this command, read-only in
	// the session before the command exists.
	var bind []string
	var bindFds []int
	for i, p := range r.Held {
		if !boundAlready(p, held[i]) {
			bind, bindFds = append(bind, p), append(bindFds, held[i])
		}
	}
	if len(bind) > 0 {
		if err := z.bindHeldPaths(bind, bindFds); err != nil {
			return fail(fmt.Sprintf("session: keeping protected paths read-only: %v", err))
		}
	}
	if err := z.ensureHidden(r.Hides); err != nil {
		return fail(fmt.Sprintf("session: hiding secrets: %v", err))
	}
	if z.sp.Net.Proxy && !z.sp.Net.ProxyOff {
		// On the zygote's main goroutine, as the rest of its own
		// sockets: this thread is already the command's.
		ch := make(chan listeners)
		z.listen <- ch
		l := <-ch
		if l.err != nil {
			return fail(fmt.Sprintf("session: the command's proxy listeners: %v", l.err))
		}
		j.proxy, j.ports = l.fds, l.ports
	}
	j.r = r
	return j, true
}

// sendReply answers on a command's reply socket, with fds as SCM_RIGHTS.
// A caller that has gone away does not matter: its command is killed
// when it closes the session (or dies).
func sendReply(fd int, r spec.Answer, fds ...int) {
	scm.Send(fd, r.Append(nil), fds)
}

// worker prepares a thread of its own for the next command, reads that
// command's request from the control socket itself, forks the command
// and waits for it there. Preparing before the request arrives takes the
// restrictions off the command's start-up path, and reading it on this
// thread takes a wake-up of another thread off it; the thread is as
// fresh as if it had been made for the request, and serves only it. The
// goroutine never unlocks its thread: when it returns, the thread, with
// the restrictions it carries, is destroyed. While this thread forks,
// nobody reads the control socket; the next command's thread takes over
// once this command is started (preparing it earlier would compete for
// the CPU with this start).
func (z *zygote) worker() {
	runtime.LockOSThread()
	// The command's id, once its request is read: its supervisor, started
	// before, records its name server sockets under it.
	var id atomic.Uint32
	unreach := newUnreachables(z.sp)
	var files filesSeen
	sup, perr := z.prepare(&id, unreach, &files)
	var in *waitingInit
	if perr == nil && z.sp.Session.Init != "" {
		in, perr = z.startInit()
	}
	j, ok := z.next()
	if !ok {
		in.kill()
		return
	}
	r, stdio := j.r, j.stdio
	id.Store(uint32(r.ID))
	defer unix.Close(j.reply)
	pid, pidfd, code, err := 0, -1, exitcode.SandboxFailure, perr
	hiddenBefore := z.hidden.counts()
	if err == nil {
		pid, pidfd, code, err = z.fork(r, stdio, j.ports, in)
	}
	scm.CloseAll(stdio[:])
	if err != nil {
		scm.CloseAll(j.proxy)
		sendReply(j.reply, spec.Answer{ID: r.ID, Error: err.Error(), Code: code})
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
	sendReply(j.reply, spec.Answer{ID: r.ID, Started: true}, j.proxy...)
	scm.CloseAll(j.proxy)
	go z.worker()

	var ws unix.WaitStatus
	reported := -1
	switch {
	case in != nil:
		reported, err = in.wait(sup, &ws)
	case sup != nil:
		// On this thread, which the supervisor's work needs, without
		// a goroutine of its own to wake this one when the command ends.
		err = sup.WaitPidfd(pidfd, pid, &ws)
	default:
		err = wait4(pid, &ws)
	}
	z.mu.Lock()
	delete(z.cmds, r.ID)
	as := c.as
	unix.Close(c.pidfd)
	z.mu.Unlock()
	files.hiddenRead(z.hidden, hiddenBefore, z.sp.Walls.Files)
	m := spec.Answer{ID: r.ID, Exited: true, Unreachable: unreach.list(), Files: files.denied(maxFilesAnswer), FilesUnavailable: files.unavailable}
	switch {
	case reported >= 0:
		m.Status = reported
	case err != nil:
		m.Error, m.Code = fmt.Sprintf("waiting for the command: %v", err), exitcode.SandboxFailure
	case ws.Signaled() && as != 0 && ws.Signal() == syscall.SIGKILL:
		m.Signal = int(as)
	case ws.Signaled():
		m.Signal = int(ws.Signal())
	default:
		m.Status = ws.ExitStatus()
	}
	sendReply(j.reply, m)
	if reported >= 0 {
		// The init is exiting: reap it (on this thread, whose end
		// would kill it anyway).
		wait4(pid, &ws)
	}
}

func wait4(pid int, ws *unix.WaitStatus) error {
	for {
		_, err := unix.Wait4(pid, ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// prepare restricts the calling (locked) thread, which the command will
// be forked from: the hardening of a lone run's init, on this thread
// alone (harden_linux.go).
func (z *zygote) prepare(id *atomic.Uint32, unreach *unreachables, files *filesSeen) (*unixsock.Supervisor, error) {
	h := hardening{sp: z.sp, scope: oneThread, rules: z.rules, prog: z.prog, unreach: unreach, files: files}
	if z.owners != nil {
		h.connected = func(sock int, dst netip.AddrPort, errno unix.Errno) {
			z.owners.Own(id.Load(), sock, dst, errno)
		}
	}
	return h.harden()
}

// fork starts the command from the calling, prepared thread. ports, with
// an allow-list, are those of the command's own proxy listeners. With an
// init waiting (in), the init runs the command and is what fork returns;
// it is killed if the command cannot be started.
func (z *zygote) fork(r spec.Request, stdio [3]int, ports []int, in *waitingInit) (pid, pidfd, code int, err error) {
	sp := z.sp
	fail := func(code int, err error) (int, int, int, error) {
		in.kill()
		return 0, -1, code, err
	}
	// The session's own variables (the tool caches' private
	// directories, and fallbacks chosen while the root was built) win
	// over the caller's, as in a lone run.
	env := r.Env
	for _, kv := range sp.Command.Env {
		env = ReplaceEnv(env, kv)
	}
	if len(ports) == 2 {
		// As in a lone run, the proxy variables win over the caller's.
		env = withProxyEnv(env, loopbackAddrs(ports), sp)
	}
	dir := sp.Command.Cwd
	if r.Dir != "" {
		dir = r.Dir
	}
	path, code, err := lookpath.FindIn(r.Path, lookpath.Env(env), dir)
	if err != nil {
		return fail(code, err)
	}
	if in != nil {
		job := pid1.Job{Path: path, Dir: dir, Argv: r.Argv, Env: env}
		if err := in.hand(&job, stdio); err != nil {
			return fail(exitcode.SandboxFailure, fmt.Errorf("handing %s to its init: %w", r.Argv[0], err))
		}
		return in.pid, in.pidfd, 0, nil
	}
	pidfd = -1
	pid, err = syscall.ForkExec(path, r.Argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys: &syscall.SysProcAttr{
			// Its own pid namespace: the command is its PID 1, and
			// whatever it leaves behind dies with it. Its own IPC
			// namespace: SysV objects and POSIX message queues it
			// makes die with it too, instead of staying for the
			// session's next command, as a lone run's do.
			Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWIPC,
			// No controlling terminal: no TIOCSTI into the caller's.
			Setsid: true,
			// If this thread (or the zygote) dies, so does the command.
			Pdeathsig: syscall.SIGKILL,
			PidFD:     &pidfd,
		},
	})
	if err != nil {
		return fail(exitcode.Classify(err), fmt.Errorf("starting %s: %w", r.Argv[0], err))
	}
	return pid, pidfd, 0, nil
}

// waitingInit is a command's init (package pid1), started and waiting
// for its job on sock.
type waitingInit struct {
	pid, pidfd, sock int
	// report is sock once the job went out: the init's report of the
	// command's status comes back on it.
	report int
}

// startInit starts the next command's init from the calling, prepared
// thread, in the pid and IPC namespaces the command will have, as fork
// would start the command itself.
func (z *zygote) startInit() (*waitingInit, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "socketpair", Err: err}
	}
	defer unix.Close(pair[1])
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(pair[0])
		return nil, &os.PathError{Op: "open", Path: "/dev/null", Err: err}
	}
	defer unix.Close(null)
	in := &waitingInit{pidfd: -1, sock: pair[0], report: -1}
	in.pid, err = syscall.ForkExec(z.sp.Session.Init, []string{pid1.Arg0}, &syscall.ProcAttr{
		Dir: "/",
		// Nothing of the caller's: the command's environment comes
		// with its job. One P: the init runs one goroutine at a time
		// at most, and fewer threads start and exit faster.
		Env:   []string{"GOMAXPROCS=1"},
		Files: []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(pair[1])},
		Sys: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWIPC,
			Setsid:     true,
			Pdeathsig:  syscall.SIGKILL,
			PidFD:      &in.pidfd,
		},
	})
	if err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("starting the command's init %s: %w", z.sp.Session.Init, err)
	}
	return in, nil
}

// hand sends the init its job and the command's stdio, and shuts the
// socket for writing: the init starts the command on reading EOF. The
// socket then waits for the init's report (see wait).
func (in *waitingInit) hand(j *pid1.Job, stdio [3]int) error {
	b, err := j.Encode()
	if err != nil {
		return err
	}
	defer func() {
		unix.Shutdown(in.sock, unix.SHUT_WR)
		in.report, in.sock = in.sock, -1
	}()
	first := min(len(b), 32<<10)
	n, err := unix.SendmsgN(in.sock, b[:first], unix.UnixRights(stdio[:]...), nil, unix.MSG_NOSIGNAL)
	for err == unix.EINTR {
		n, err = unix.SendmsgN(in.sock, b[:first], unix.UnixRights(stdio[:]...), nil, unix.MSG_NOSIGNAL)
	}
	for b = b[n:]; err == nil && len(b) > 0; b = b[n:] {
		n, err = unix.SendmsgN(in.sock, b, nil, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			n, err = 0, nil
		}
	}
	return err
}

// wait waits for the init's report of the command's status (package
// pid1: sent once the command's whole tree is gone, before the init's own
// exit) or for the init's end, running the connect supervisor's work
// meanwhile when there is one. It returns the reported status, or -1 when
// the init ended without one (killed, say): ws is then its wait status.
// It closes the report socket.
func (in *waitingInit) wait(sup *unixsock.Supervisor, ws *unix.WaitStatus) (int, error) {
	defer func() { unix.Close(in.report); in.report = -1 }()
	var exited bool
	var err error
	if sup != nil {
		exited, err = sup.WaitPidfdOr(in.pidfd, in.pid, in.report, ws)
	} else {
		pfd := []unix.PollFd{{Fd: int32(in.pidfd), Events: unix.POLLIN}, {Fd: int32(in.report), Events: unix.POLLIN}}
		for {
			_, err = unix.Poll(pfd, -1)
			if err != unix.EINTR {
				break
			}
		}
		exited = err != nil || pfd[1].Revents == 0
		if exited {
			err = wait4(in.pid, ws)
		}
	}
	if exited || err != nil {
		return -1, err
	}
	var b [1]byte
	n, rerr := unix.Read(in.report, b[:])
	for rerr == unix.EINTR {
		n, rerr = unix.Read(in.report, b[:])
	}
	if n != 1 {
		// Hung up without a report: the init's own status says it.
		return -1, wait4(in.pid, ws)
	}
	return int(b[0]), nil
}

// kill ends an init that will get no job, and reaps it; a nil init is
// none.
func (in *waitingInit) kill() {
	if in == nil || in.pidfd < 0 {
		return
	}
	for _, fd := range []int{in.sock, in.report} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	unix.PidfdSendSignal(in.pidfd, unix.SIGKILL, nil, 0)
	var ws unix.WaitStatus
	wait4(in.pid, &ws)
	unix.Close(in.pidfd)
	in.pidfd = -1
}

// landlockRoots are the writable roots for Landlock: the policy's, and
// the session's own /dev/shm tmpfs.
func landlockRoots(sp *spec.Spec) []string {
	return append(append([]string{}, sp.Walls.WritableRoots...), "/dev/shm")
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

func readMemfd(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size > spec.MaxBigRequest || st.Size < 0 {
		return nil, fmt.Errorf("request of %d bytes exceeds %d", st.Size, spec.MaxBigRequest)
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
