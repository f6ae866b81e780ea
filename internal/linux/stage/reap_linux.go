package stage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// Degraded mode has no pid namespace whose end kills everything, so a
// separate stage, the reaper, stands between agentbox and the init:
//
//	agentbox ── reaper (child subreaper) ── init ── command ── …
//
// Why a process of its own rather than agentbox: PR_SET_CHILD_SUBREAPER is
// per process, and a library caller made a subreaper inherits the orphans
// of everything else it runs, which it would then have to reap with
// wait(-1), stealing exit statuses from its own exec.Cmds. Why not the
// init alone: the init forks the command from its Landlocked thread, so the
// command is in the init's Landlock domain and may kill it; the reaper is
// outside that domain, which signal scoping (Landlock ABI 6) keeps the
// command from signalling.
//
// The reaper ends the run, sweeping every descendant, when the init exits
// (the command ended), when agentbox closes the lifeline (Kill: a timeout
// or a cancelled context) and when the lifeline breaks because agentbox
// died, SIGKILL included: the kernel closes a dead process's descriptors.

// isReaper reports whether this process is the reaper stage.
func isReaper() bool {
	return len(os.Args) > 0 && os.Args[0] == spec.ReaperArg0 && os.Getenv(spec.StageEnv) == spec.ReaperValue
}

// reaperSignals are forwarded to the init, which forwards them to the
// command: the same set the init forwards.
var reaperSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}

// runReaper is the reaper stage. It never returns.
func runReaper() {
	// Nothing of ours reaches the init but what we pass on purpose.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ {
			unix.CloseOnExec(fd)
		}
	}
	status := os.NewFile(spec.StatusFD, "status")
	fail := func(err error) {
		m := spec.Message{Error: err.Error(), Code: exitcode.SandboxFailure}
		status.Write(m.AppendFrame(nil))
		os.Exit(exitcode.SandboxFailure)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail(&os.SyscallError{Syscall: "prctl(PR_SET_CHILD_SUBREAPER)", Err: err})
	}
	// The command runs as our uid; keep it out of our memory and fds.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(&os.SyscallError{Syscall: "prctl(PR_SET_DUMPABLE)", Err: err})
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, reaperSignals...)
	signal.Ignore(syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGALRM)

	// The init gets what agentbox gave us for it, in place: the
	// environment (but for our own marks) and fds 3 to 3+n-1.
	n, err := strconv.Atoi(os.Getenv(spec.InitFDsEnv))
	if err != nil || n < 2 || n > 64 {
		fail(fmt.Errorf("reaper: bad %s=%q", spec.InitFDsEnv, os.Getenv(spec.InitFDsEnv)))
	}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	for fd := 3; fd < 3+n; fd++ {
		files = append(files, os.NewFile(uintptr(fd), "init"))
	}
	files[spec.StatusFD] = status
	lifelineFD := 3 + n
	var initEnv []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, spec.InitFDsEnv+"="), strings.HasPrefix(kv, spec.StageEnv+"="):
		default:
			initEnv = append(initEnv, kv)
		}
	}
	initEnv = append(initEnv, spec.StageEnv+"="+spec.StageValue)

	// Where the caller's cgroup is delegated to it, the init is born in
	// a cgroup of its own, which cgroup.kill empties in one step.
	cg := newRunCgroup()
	if cg != nil && cg.enter() != nil {
		cg.remove()
		cg = nil
	}
	init, err := os.StartProcess("/proc/self/exe", []string{spec.StageArg0}, &os.ProcAttr{
		Env:   initEnv,
		Files: files,
		Sys: &syscall.SysProcAttr{
			// Its own session, as before: no controlling terminal.
			Setsid: true,
			// If the reaper is killed outright, the init and the
			// command go too (the rest is what a SIGKILL of the
			// reaper cannot cover).
			Pdeathsig: syscall.SIGKILL,
		},
	})
	if cg != nil && cg.leave() != nil {
		// Still inside: cgroup.kill would take us too. The sweep
		// alone ends the run; the next run removes the cgroup.
		cg = nil
	}
	if err != nil {
		if cg != nil {
			cg.remove()
		}
		fail(fmt.Errorf("starting the sandbox init: %w", err))
	}
	for _, f := range files[3:] {
		if f != status {
			f.Close() // the init's now
		}
	}
	initPid := init.Pid

	// Forwarding goes through os.Process, which signals by pidfd: once
	// the init is reaped below, its pid may name a stranger, and a pidfd
	// still names the init.
	initGone := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				init.Signal(s)
			case <-initGone:
				return
			}
		}
	}()
	var killed bool
	lifeline := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.NewFile(uintptr(lifelineFD), "lifeline"))
		close(lifeline)
	}()
	reaped := make(chan struct{}, 1)
	var sweepOnce sync.Once
	startSweep := func() {
		sweepOnce.Do(func() {
			if cg != nil {
				cg.kill() // the sweep below then finds the dead
			}
			go sweep(reaped)
		})
	}
	go func() {
		<-lifeline
		startSweep()
	}()

	// Reap everything that comes to us until nothing is left: no child
	// means no descendant, so the run is over. The sweep runs beside
	// this loop, so that zombies never pile up while it works.
	var initStatus unix.WaitStatus
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			break // ECHILD
		}
		select {
		case reaped <- struct{}{}:
		default:
		}
		if pid == initPid {
			initStatus = ws
			close(initGone)
			startSweep()
		}
	}
	if cg != nil {
		cg.remove()
	}
	select {
	case <-lifeline:
		killed = true
	default:
	}
	switch {
	case killed:
		// Killed on request: report it as the SIGKILL it replaces.
		unix.Kill(os.Getpid(), unix.SIGKILL)
	case initStatus.Signaled():
		os.Exit(128 + int(initStatus.Signal()))
	}
	os.Exit(initStatus.ExitStatus())
}

// sweepWait bounds one wait for the processes a pass killed; a process
// stuck in the kernel (a hung network filesystem) is retried, not waited
// for forever without looking again.
const sweepWait = time.Second

// sweep kills every descendant of this process; it returns once this
// process has no child left (or runs until the reaper exits, which it does
// when wait4 says there is none). Each pass freezes what it finds before
// reading its children (a stopped process cannot fork, and one stopped
// mid-fork does not finish it), so a pass reaches the whole tree but what
// was orphaned to us during the pass; then it kills them all and blocks
// until they have exited. Orphans go to us as subreaper, so the next pass
// finds them. A pass that finds only the dead waits for the reaper's loop
// to reap them (reaped), never spinning on them.
func sweep(reaped <-chan struct{}) {
	self := os.Getpid()
	for {
		fds, live := freeze(self)
		for _, fd := range fds {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		awaitExit(fds)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if live > 0 {
			continue
		}
		if len(children(self)) == 0 {
			return
		}
		// Only zombies (or processes that went as we looked): the
		// loop in runReaper reaps them; look again when it has.
		select {
		case <-reaped:
		case <-time.After(sweepWait):
		}
	}
}

// freeze stops every descendant of self and returns a pidfd for each,
// and how many of them were still alive.
func freeze(self int) (fds []int, live int) {
	ours := map[int]bool{self: true}
	queue := children(self)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if ours[pid] {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // already reaped
		}
		// The pid was read from a children list; it might have been
		// reaped and reused before the pidfd pinned it. The pidfd
		// now names one process for good: keep it only if its parent
		// is one of ours.
		if ppid, err := procPPid(pid); err != nil || !ours[ppid] {
			unix.Close(fd)
			continue
		}
		unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0)
		ours[pid] = true
		fds = append(fds, fd)
		if exited(fd) {
			// Gone (a zombie): it has no children, and once reaped its
			// pid may name a stranger, whose children we must not
			// read. A leader that exited before its other threads
			// has not "exited" here; it is walked.
			continue
		}
		// Alive, so the pid is still its own; stopping, so it soon
		// neither forks nor reaps while we read its children.
		live++
		queue = append(queue, children(pid)...)
	}
	return fds, live
}

// exited reports whether the process behind a pidfd has exited.
func exited(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n == 1
}

// awaitExit blocks until every process behind fds has exited (a pidfd
// polls readable then), or sweepWait passes without progress.
func awaitExit(fds []int) {
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for len(pfds) > 0 {
		n, err := unix.Poll(pfds, int(sweepWait/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		left := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				left = append(left, p)
			}
		}
		pfds = left
	}
}

// procPPid reads the parent of pid from /proc/pid/stat.
func procPPid(pid int) (int, error) {
	f, err := procStat(pid, 4)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1]) // field 4
}

// children lists the direct children of pid from every one of its
// threads' children files.
func children(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
