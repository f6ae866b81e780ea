package stage

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/lookpath"

	"golang.org/x/sys/unix"
)

// IsInit reports whether this process is a re-exec'd stage: the init or,
// in degraded mode, the reaper above it. RunInit runs either.
func IsInit() bool {
	return len(os.Args) > 0 && os.Args[0] == spec.StageArg0 && os.Getenv(spec.StageEnv) == spec.StageValue || isReaper()
}

// RunInit is the init stage: PID 1 of the sandbox's pid namespace. It never
// returns.
//
// It is the sandbox's setup in the order the kernel requires, one step
// after the other; each step returns what it set up. The namespaces come
// first, at the clone (initSysProcAttr in launch_linux.go); then, while
// the init still holds capabilities in its user namespace: the mounts and
// the pivot into the new root, the network; then, with nothing left to
// set up, every way back to privilege goes: no_new_privs, the
// capabilities, Landlock, seccomp and the unix socket supervisor; and
// last the command. A session's zygote shares the steps up to the new
// root and then hardens each command's thread itself (zygote_linux.go).
func RunInit() {
	if isReaper() {
		runReaper() // degraded mode's stage above the init
	}
	// Every descriptor beyond stdio is closed on exec: the command must not
	// inherit ours (the status pipe) nor any the caller leaked to agentbox,
	// which could reach outside the sandbox (runc's CVE-2024-21626).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ {
			unix.CloseOnExec(fd)
		}
	}
	status := os.NewFile(spec.StatusFD, "status")
	report := func(m spec.Message) { status.Write(m.AppendFrame(nil)) }
	fail := func(code int, err error) {
		report(spec.Message{Error: err.Error(), Code: code})
		os.Exit(code)
	}
	sp, err := readSpec()
	if err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("sandbox init: %w", err))
	}
	os.Unsetenv(spec.StageEnv)
	var sigs *caughtSignals
	if !sp.Session.On {
		// The runtime enables each signal in a round trip with a
		// thread of its own, which costs a few hundred microseconds:
		// let that happen while the root is built.
		sigs = catchSignals()
	}

	// 1. Namespaces: entered at the clone. Without them (degraded mode),
	// orphans of the command would escape to the system's init; as
	// subreaper we inherit and kill them.
	env := sp.Command.Env
	if sp.Degraded.On {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fail(exitcode.SandboxFailure, &os.SyscallError{Syscall: "prctl(PR_SET_CHILD_SUBREAPER)", Err: err})
		}
	} else {
		// 2. Mounts and the pivot into the new root, while we hold
		// CAP_SYS_ADMIN in the user namespace (mount_linux.go).
		cacheEnv, err := buildRoot(sp)
		if err != nil {
			if errors.Is(err, unix.EPERM) {
				report(spec.Message{Error: err.Error(), Code: exitcode.SandboxFailure, NoUserns: true})
				os.Exit(exitcode.SandboxFailure)
			}
			fail(exitcode.SandboxFailure, fmt.Errorf("building the sandbox filesystem: %w", err))
		}
		for _, kv := range cacheEnv {
			env = ReplaceEnv(env, kv)
		}
	}
	// 3. The network: loopback in the fresh namespace (needs
	// CAP_NET_ADMIN), and the allow-list proxy's listeners on it.
	if !sp.Net.Network && !sp.Degraded.On {
		if err := loopbackUp(); err != nil {
			fail(exitcode.SandboxFailure, fmt.Errorf("bringing up loopback in the network namespace: %w", err))
		}
	}
	proxyAddrs, err := setupProxy(sp)
	if err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("setting up the allow-list proxy: %w", err))
	}
	env = withProxyEnv(env, proxyAddrs, sp)
	if err := setupPorts(sp); err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("setting up the host ports and published ports: %w", err))
	}
	for _, a := range proxyAddrs {
		if ap, err := netip.ParseAddrPort(a); err == nil && sp.Session.On {
			sp.Session.ProxyAddrs = append(sp.Session.ProxyAddrs, ap)
		}
	}
	if err := unix.Chdir(sp.Command.Cwd); err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("entering %s inside the sandbox: %w", sp.Command.Cwd, err))
	}
	if sp.Session.On {
		sp.Command.Env = env
		runZygote(sp, report) // never returns
	}
	// The command's streams, from inside the sandbox: the caller's
	// terminal and files stay in agentbox (stdio_linux.go). They need
	// the new /dev, so they come after the root is built.
	stdio, err := sandboxStdio(sp)
	if err != nil {
		fail(exitcode.SandboxFailure, err)
	}
	// Look the command up now, inside the sandbox's view of PATH, so that
	// "not found" and "not executable" get their own exit statuses.
	path, code, err := lookpath.Find(sp.Command.Path, lookpath.Env(env))
	if err != nil {
		fail(code, err)
	}

	// The masks' opens are the command's from here on.
	hidden := watchHiddenFor(sp)

	// From here on, nothing may be regained: steps 4 to 9, the
	// hardening of every thread (harden_linux.go).
	unreach := newUnreachables(sp)
	var files filesSeen
	h := hardening{sp: sp, scope: wholeProcess, unreach: unreach, files: &files}
	sup, err := h.harden()
	if err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("restricting the sandbox: %w", err))
	}
	var wait4 waitFunc = unix.Wait4
	if sup != nil {
		wait4 = sup.Wait4
	}

	// 10. The command, forked from this thread: it inherits exactly what
	// the steps above left on it.
	<-sigs.ready // so that it can be signalled from the start
	pid, err := startCommand(path, env, sp, stdio)
	if err != nil {
		fail(exitcode.Classify(err), fmt.Errorf("starting %s: %w", sp.Command.Argv[0], err))
	}
	stdio.close()
	report(spec.Message{Started: true, StdinReopened: stdio.stdinReopened})
	go sigs.forward(pid)

	// 11. As PID 1 we inherit every orphan; reap them all, and stop as
	// soon as the command itself is gone. Exiting tears the namespace
	// down, which kills whatever the command left running. In degraded
	// mode, what the command left running is orphaned to the reaper when
	// we exit, which kills it (reap_linux.go).
	ws, err := reap(wait4, pid)
	if err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("waiting for the command: %w", err))
	}
	files.hiddenRead(hidden, nil, sp.Walls.Files)
	m := spec.Message{Exited: true, Unreachable: unreach.list(), Files: files.denied(maxFilesMessage), FilesUnavailable: files.unavailable}
	if ws.Signaled() {
		m.Signal = int(ws.Signal())
		report(m)
		os.Exit(128 + m.Signal)
	}
	m.Status = ws.ExitStatus()
	report(m)
	os.Exit(m.Status)
}

// caughtSignals are the signals the init forwards to the command.
type caughtSignals struct {
	c chan os.Signal
	// ready is closed once they are caught.
	ready chan struct{}
}

// catchSignals starts catching the signals the init forwards, and
// ignoring the others, in the background.
func catchSignals() *caughtSignals {
	s := &caughtSignals{c: make(chan os.Signal, 16), ready: make(chan struct{})}
	go func() {
		defer close(s.ready)
		signal.Notify(s.c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
			syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT)
		// The command may signal its PID 1 with anything; the Go
		// runtime would answer SIGABRT or a sent SIGSEGV with a
		// register dump and a misleading status. Ignore what we do not
		// forward.
		signal.Ignore(syscall.SIGABRT, syscall.SIGSYS, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE,
			syscall.SIGSEGV, syscall.SIGILL, syscall.SIGALRM, syscall.SIGPIPE, syscall.SIGTSTP,
			syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGSTKFLT)
		debug.SetTraceback("none")
	}()
	return s
}

// forward passes the caught signals on to the command, pid.
func (s *caughtSignals) forward(pid int) {
	for sig := range s.c {
		sig := sig.(syscall.Signal)
		syscall.Kill(pid, sig)
		switch sig {
		case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
			// A stopped command would hold a terminating signal
			// pending forever (and agentbox with it).
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// startCommand forks the command from the calling thread and returns its
// pid. syscall.ForkExec rather than os/exec: the init needs no pidfd for
// its one child, and os/exec's first start probes pidfd support with a
// fork of its own.
func startCommand(path string, env []string, sp *spec.Spec, stdio *commandStdio) (int, error) {
	// No parent-death signal: if this init dies, the kernel kills every
	// process of its pid namespace, and in degraded mode the reaper
	// above kills its tree (TestAgentboxKilled, TestDegradedInitKilled
	// pass without one).
	sys := &syscall.SysProcAttr{}
	if stdio.ctty >= 0 {
		// The sandbox's terminal is the command's controlling terminal,
		// so ^C typed on it signals the command's foreground group.
		sys.Setsid = true
		sys.Setctty = true
		sys.Ctty = stdio.ctty
	}
	pid, err := syscall.ForkExec(path, sp.Command.Argv, &syscall.ProcAttr{
		Dir:   sp.Command.Cwd,
		Env:   env,
		Files: []uintptr{stdio.files[0].Fd(), stdio.files[1].Fd(), stdio.files[2].Fd()},
		Sys:   sys,
	})
	runtime.KeepAlive(stdio)
	return pid, err
}

// reap waits for children until pid has ended, and returns how it ended.
func reap(wait4 waitFunc, pid int) (unix.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		wpid, err := wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ws, err
		}
		if wpid == pid && (ws.Exited() || ws.Signaled()) {
			return ws, nil
		}
	}
}

func readSpec() (*spec.Spec, error) {
	f := os.NewFile(spec.SpecFD, "spec")
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	s, err := spec.DecodeSpec(data)
	if err != nil {
		return nil, fmt.Errorf("decoding spec: %w", err)
	}
	if !s.Session.On && (len(s.Command.Argv) == 0 || s.Command.Path == "") {
		return nil, errors.New("empty command")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// loopbackUp brings "lo" up in the fresh network namespace so servers the
// command starts on 127.0.0.1 work.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return err
	}
	return nil
}

func init() {
	// The init stage changes per-thread credentials (see dropCapabilities) and
	// must fork the command from that same thread: lock the main
	// goroutine to its thread for the life of the process.
	if IsInit() {
		runtime.LockOSThread()
		// Take over here, while the packages are being initialized,
		// rather than in the caller's main: a program that forgets
		// sandbox.Main would otherwise run its own main as the init
		// stage. Only this package's dependencies (and packages the
		// Go runtime orders before it) have run their init functions.
		RunInit() // never returns
	}
	if isMounter() {
		// A session's mounter (mounter_linux.go): its mounts are made
		// with the capability it keeps on this thread alone.
		runtime.LockOSThread()
		runMounter() // never returns
	}
}
