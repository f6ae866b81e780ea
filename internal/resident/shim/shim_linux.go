// Package shim is PID 1 of every command agentbox's resident helper
// runs. It takes over from its package init function, before the heavier
// packages of the agentbox binary initialise: it imports only the
// standard library and two small internal packages, whose import paths
// sort before those of the CLI's third-party dependencies.
package shim

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/lookpath"
)

// A session's command is PID 1 of its own pid namespace, and the kernel
// drops a default-action signal sent to a namespace's init from inside it:
// `kill -TERM $$` would not end it, a SIGPIPE from a closed pipe would be
// lost, abort() would end in SIGSEGV. A lone run's command is not its
// namespace's init, so the helper starts each command under this shim: it
// is PID 1 (started by the zygote with the command's restrictions, and
// holding nothing the command does not), runs the command as its child in
// a session of its own, forwards the signals it receives, reaps orphans,
// and exits with the command's status (128+N when a signal N killed it,
// which is what the CLI reports either way); its exit ends the namespace
// and everything left in it, as a lone run's init does.

// Arg0 is argv[0] of the shim: only the helper starts the agentbox
// binary with it.
const Arg0 = "agentbox-resident-init"

func init() {
	if len(os.Args) > 1 && os.Args[0] == Arg0 {
		os.Exit(run())
	}
}

// forwarded are the signals the shim passes on to the command (the
// zygote delivers them to PID 1; Go's own SIGURG and the shim's SIGCHLD
// are not the command's).
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2,
	syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGCONT, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGWINCH,
	syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGPWR, syscall.SIGSYS,
}

// run runs the command os.Args[1:] and returns the exit status the shim
// must exit with.
func run() int {
	// The command may not read our memory through /proc/1 (it could only
	// make us report another status, which it can choose anyway).
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	argv := os.Args[1:]
	env := os.Environ()
	// Looked up as a lone run's init does, with its statuses and words.
	path, code, err := lookpath.Find(argv[0], lookpath.Env(env))
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentbox: %v\n", err)
		return code
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		// Its own session, as a lone run's command: its kill(0) and
		// job control reach its own group, not the shim.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentbox: %s: %v\n", argv[0], err)
		if err == syscall.ENOENT {
			return exitcode.NotFound
		}
		return exitcode.NotExecutable
	}
	go func() {
		for s := range sigs {
			syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "agentbox: waiting for the command: %v\n", err)
			return exitcode.SandboxFailure
		}
		if got != pid {
			continue // an orphan, reaped
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}
