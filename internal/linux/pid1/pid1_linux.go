package pid1

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentbox/agentbox/internal/exitcode"
)

// A session's command would be PID 1 of its own pid namespace, and the
// kernel drops a default-action signal sent to a namespace's init from
// inside it: `kill -TERM $$` would not end it, a SIGPIPE from a closed
// pipe would be lost, abort() would end in SIGSEGV. A lone run's command
// is not its namespace's init. So a session that asks for it starts each
// command under this init: PID 1 (started by the zygote from the
// command's prepared thread, so with the command's restrictions, and
// holding nothing the command does not), it runs the command as its
// child in a session of its own, forwards the signals it receives, reaps
// orphans, and exits with the command's status (128+N when a signal N
// killed it, which is what agentbox reports either way); its exit ends
// the namespace and everything left in it, as a lone run's init does.
//
// The zygote starts it before the command is asked for: a Go process's
// start and its signal set-up (each signal.Notify of a signal waits for
// the runtime's signal thread) cost more than the command's own start,
// and are then off the command's path.

func init() {
	if len(os.Args) == 1 && os.Args[0] == Arg0 {
		os.Exit(run())
	}
}

// forwarded are the signals the init passes on to the command (the
// zygote delivers them to PID 1; Go's own SIGURG and the init's SIGCHLD
// are not the command's).
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2,
	syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGCONT, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGWINCH,
	syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGPWR, syscall.SIGSYS,
}

// run waits for its job, runs it and returns the exit status the init
// must exit with.
func run() int {
	// The command may not read our memory through /proc/1 (it could only
	// make us report another status, which it can choose anyway).
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	j, err := receive(JobFD)
	if err != nil {
		// Nobody to tell but the zygote, which sees the status.
		return exitcode.SandboxFailure
	}
	// The socket stays ours, for the report, and is not the command's.
	syscall.CloseOnExec(JobFD)
	pid, err := syscall.ForkExec(j.Path, j.Argv, &syscall.ProcAttr{
		Dir:   j.Dir,
		Env:   j.Env,
		Files: []uintptr{0, 1, 2},
		// Its own session, as a lone run's command: its kill(0) and
		// job control reach its own group, not the init.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		say("starting " + j.Argv[0] + ": " + err.Error())
		return exitcode.Classify(err)
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
			say("waiting for the command: " + err.Error())
			return exitcode.SandboxFailure
		}
		if got != pid {
			continue // an orphan, reaped
		}
		status := -1
		switch {
		case ws.Exited():
			status = ws.ExitStatus()
		case ws.Signaled():
			status = 128 + int(ws.Signal())
		}
		if status >= 0 {
			report(status)
			return status
		}
	}
}

// report ends everything the command left in the namespace, reaps it,
// and then tells the zygote the command's status, before this process
// exits: its own exit (a Go process's threads and memory to tear down,
// then the namespace's) would otherwise sit between the command's end and
// its caller's answer. The tree is gone when the report is sent: kill(-1)
// from a namespace's init reaches every other process in it (and no
// process with a SIGKILL pending can fork), every process there descends
// from the init, and wait4 answers ECHILD only once none is left.
func report(status int) {
	// Only as a namespace's init: anywhere else kill(-1) would reach
	// every process of the user (all of them, for root).
	if syscall.Getpid() == 1 {
		syscall.Kill(-1, syscall.SIGKILL)
	}
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err == syscall.ECHILD {
			break
		}
	}
	// Nor does the command's stdio outlive the report: a reader of its
	// output sees EOF by the time the caller has its answer.
	for fd := range 3 {
		syscall.Close(fd)
	}
	syscall.Write(JobFD, []byte{byte(status)})
}

// say writes an error to the command's stderr, as a lone run's init
// would.
func say(msg string) { os.Stderr.WriteString("agentbox: " + msg + "\n") }

// receive reads the job from fd and puts the command's stdio on 0, 1 and
// 2 (so that the init's own words reach the command's stderr).
func receive(fd int) (*Job, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
	for err == syscall.EINTR {
		n, oobn, _, _, err = syscall.Recvmsg(fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
	}
	if err != nil {
		return nil, err
	}
	var fds []int
	if cms, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if rights, err := syscall.ParseUnixRights(&cm); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	if len(fds) != 3 {
		for _, f := range fds {
			syscall.Close(f)
		}
		return nil, errors.New("the job came without the command's three stdio descriptors")
	}
	// Received as 4 and up: 0 to 2 are the init's /dev/null, 3 is fd.
	for i, f := range fds {
		if err := syscall.Dup3(f, i, 0); err != nil {
			return nil, err
		}
		syscall.Close(f)
	}
	b := buf[:n]
	for {
		if len(b) == cap(b) {
			if len(b) > MaxJob {
				return nil, errors.New("the job is too long")
			}
			b = append(b, make([]byte, len(b))...)[:len(b)]
		}
		m, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		b = b[:len(b)+m]
	}
	return decodeJob(b)
}
