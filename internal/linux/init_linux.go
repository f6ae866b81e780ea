package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/agentbox/agentbox/internal/exitcode"

	"github.com/agentbox/agentbox/internal/lookpath"

	"golang.org/x/sys/unix"
)

// The parent hands the init stage two pipes, named by these fds (runc's
// pattern): the spec to read, and a status channel to report on.
const (
	specFD   = 3
	statusFD = 4
	// stageEnv marks the re-exec'd process; argv[0] alone could be faked
	// by any program named like our stage.
	stageEnv   = "_AGENTBOX_STAGE"
	stageValue = "init"
	stageArg0  = "agentbox-init"
)

// message is what the init stage reports on the status pipe.
type message struct {
	// Error is set when the sandbox could not be built or the command not
	// started; Code is then the exit status agentbox should use.
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"`
	// Started is sent once the command runs.
	Started bool `json:"started,omitempty"`
	// StdinReopened, with Started: the init opened the caller's stdin
	// file itself, and agentbox must not relay it (stdio_linux.go).
	StdinReopened bool `json:"stdin_reopened,omitempty"`
	// Exited reports how the command ended.
	Exited bool `json:"exited,omitempty"`
	Status int  `json:"status,omitempty"`
	Signal int  `json:"signal,omitempty"`
	// NoUserns marks an Error caused by a user namespace without the
	// capabilities it should have (AppArmor's restriction on Ubuntu).
	NoUserns bool `json:"no_userns,omitempty"`
}

// IsInit reports whether this process is a re-exec'd stage: the init or,
// in degraded mode, the reaper above it. RunInit runs either.
func IsInit() bool {
	return len(os.Args) > 0 && os.Args[0] == stageArg0 && os.Getenv(stageEnv) == stageValue || isReaper()
}

// RunInit is the init stage: PID 1 of the sandbox's pid namespace. It never
// returns.
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
	status := os.NewFile(statusFD, "status")
	report := func(m message) {
		b, _ := json.Marshal(m)
		status.Write(append(b, '\n'))
	}
	fail := func(code int, err error) {
		report(message{Error: err.Error(), Code: code})
		os.Exit(code)
	}
	spec, err := readSpec()
	if err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("sandbox init: %w", err))
	}
	os.Unsetenv(stageEnv)

	// Build the filesystem view, then the network, while we still hold
	// capabilities in the new user namespace.
	if spec.Degraded {
		// Without a pid namespace, orphans of the command would escape
		// to the system's init; as subreaper we inherit and kill them.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fail(exitcode.SandboxFailure, &os.SyscallError{Syscall: "prctl(PR_SET_CHILD_SUBREAPER)", Err: err})
		}
	} else if err := buildRoot(spec); err != nil {
		if errors.Is(err, unix.EPERM) {
			report(message{Error: err.Error(), Code: exitcode.SandboxFailure, NoUserns: true})
			os.Exit(exitcode.SandboxFailure)
		}
		fail(exitcode.SandboxFailure, fmt.Errorf("building the sandbox filesystem: %w", err))
	}
	if !spec.Network && !spec.Degraded {
		if err := loopbackUp(); err != nil {
			fail(exitcode.SandboxFailure, fmt.Errorf("bringing up loopback in the network namespace: %w", err))
		}
	}
	if err := setupProxy(spec); err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("setting up the allow-list proxy: %w", err))
	}
	if err := unix.Chdir(spec.Cwd); err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("entering %s inside the sandbox: %w", spec.Cwd, err))
	}
	if spec.Session {
		runZygote(spec, report) // never returns
	}
	// The command's streams, from inside the sandbox: the caller's
	// terminal and files stay in agentbox (stdio_linux.go).
	stdio, err := sandboxStdio(spec)
	if err != nil {
		fail(exitcode.SandboxFailure, err)
	}
	// Look the command up now, inside the sandbox's view of PATH, so that
	// "not found" and "not executable" get their own exit statuses.
	path, code, err := lookpath.Find(spec.Path, lookpath.Env(spec.Env))
	if err != nil {
		fail(code, err)
	}
	// From here on, nothing may be regained: no_new_privs, then every
	// capability dropped, then the optional walls, seccomp last.
	// Nobody, not even the command running as the same uid, may read our
	// memory or fds through /proc/1.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(exitcode.SandboxFailure, &os.SyscallError{Syscall: "prctl(PR_SET_DUMPABLE)", Err: err})
	}
	wait4, err := lockDown(spec)
	if err != nil {
		fail(exitcode.SandboxFailure, fmt.Errorf("restricting the sandbox: %w", err))
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT)
	// The command may signal its PID 1 with anything; the Go runtime
	// would answer SIGABRT or a sent SIGSEGV with a register dump and
	// a misleading status. Ignore what we do not forward.
	signal.Ignore(syscall.SIGABRT, syscall.SIGSYS, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE,
		syscall.SIGSEGV, syscall.SIGILL, syscall.SIGALRM, syscall.SIGPIPE, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGSTKFLT)
	debug.SetTraceback("none")

	cmd := &exec.Cmd{
		Path:   path,
		Args:   spec.Argv,
		Env:    spec.Env,
		Dir:    spec.Cwd,
		Stdin:  stdio.files[0],
		Stdout: stdio.files[1],
		Stderr: stdio.files[2],
		SysProcAttr: &syscall.SysProcAttr{
			// If this init dies, the command dies with it.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if stdio.ctty >= 0 {
		// The sandbox's terminal is the command's controlling terminal,
		// so ^C typed on it signals the command's foreground group.
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = stdio.ctty
	}
	if err := cmd.Start(); err != nil {
		code := exitcode.SandboxFailure
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			code = exitcode.NotExecutable
		} else if errors.Is(err, os.ErrNotExist) {
			code = exitcode.NotFound
		}
		fail(code, fmt.Errorf("starting %s: %w", spec.Argv[0], err))
	}
	stdio.close()
	report(message{Started: true, StdinReopened: stdio.stdinReopened})
	pid := cmd.Process.Pid

	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			syscall.Kill(pid, sig)
			switch sig {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
				// A stopped command would hold a terminating signal
				// pending forever (and agentbox with it).
				syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	}()

	// As PID 1 we inherit every orphan; reap them all, and stop as soon as
	// the command itself is gone. Returning tears the namespace down, which
	// kills whatever the command left running.
	for {
		var ws unix.WaitStatus
		wpid, err := wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			fail(exitcode.SandboxFailure, fmt.Errorf("waiting for the command: %w", err))
		}
		if wpid != pid {
			continue
		}
		// In degraded mode, what the command left running is orphaned
		// to the reaper when we exit, which kills it (reap_linux.go).
		m := message{Exited: true}
		switch {
		case ws.Exited():
			m.Status = ws.ExitStatus()
			report(m)
			os.Exit(m.Status)
		case ws.Signaled():
			m.Signal = int(ws.Signal())
			report(m)
			os.Exit(128 + m.Signal)
		}
	}
}

func readSpec() (*Spec, error) {
	f := os.NewFile(specFD, "spec")
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decoding spec: %w", err)
	}
	if !s.Session && (len(s.Argv) == 0 || s.Path == "") {
		return nil, errors.New("empty command")
	}
	return &s, nil
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
	// The init stage changes per-thread credentials (see lockDown) and
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
}
