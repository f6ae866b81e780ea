package resident

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/internal/resident/proto"
	"github.com/agentbox/agentbox/policy"
)

// Spawn starts the helper for stateDir, for the next run, when this run
// of pol with stdio is one it could serve and no helper is there to
// serve it: the lean client (package client) found none, and this run
// starts on its own.
func Spawn(stateDir string, pol *policy.Policy, stdio [3]*os.File) {
	if !Eligible(pol, stdio) {
		return
	}
	dir := Dir(stateDir)
	sock := filepath.Join(dir, "sock")
	if len(sock) >= 108 {
		return
	}
	if err := ident.CheckDir(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			spawn(stateDir)
		}
		return
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
		spawn(stateDir)
	}
}

// Eligible reports whether a run could go through the helper: a policy
// it serves, and stdio a lone run passes to the command as it is
// (anonymous pipes, connected unix stream sockets, /dev/null and the
// sandbox's other devices). Terminals, files and the rest are what a lone
// run treats specially (a pseudo-terminal of its own, a reopened file, a
// relay): those runs start on their own.
func Eligible(pol *policy.Policy, stdio [3]*os.File) bool {
	// A published port is open on the host while the run lasts: a
	// session the helper keeps between runs would keep it open. Such a
	// run starts on its own; host ports have nothing on the host side
	// to keep open, and are served.
	if pol.Mode() == policy.DangerFullAccess || pol.AllowList() != nil || len(pol.Publish()) > 0 {
		return false
	}
	for _, f := range stdio {
		if f == nil || !linux.PassesStdio(f) {
			return false
		}
	}
	return true
}

// spawn starts a helper for stateDir unless one is alive or starting. It
// does not wait for it to serve: this run starts on its own.
func spawn(stateDir string) {
	dir := Dir(stateDir)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return
	}
	if ident.CheckDir(dir) != nil {
		return
	}
	// One CLI at a time starts a helper, and only when none holds the
	// helper's lock.
	sl, err := os.OpenFile(filepath.Join(dir, "spawn.lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	defer sl.Close()
	if unix.Flock(int(sl.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	if helperAlive(dir) {
		return
	}
	// Through an intermediate process that starts the helper and exits:
	// the helper is then nobody's child here (this CLI's caller sees no
	// extra child of it, and the helper is reparented away).
	cmd := helperCommand(stateDir, true)
	for _, k := range []string{"HOME", "XDG_STATE_HOME", "PATH", idleEnv} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if err := cmd.Run(); err != nil {
		return
	}
	// Hold the spawn lock until the helper holds its own (or gave up),
	// so that a racing CLI does not start a second one.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !helperAlive(dir); {
		time.Sleep(2 * time.Millisecond)
	}
}

// helperCommand is the helper (or, with detach, the process that starts
// it), detached: a session of its own, no descriptor of ours (stdio is
// /dev/null), the root as its directory, and only the environment the
// caller adds (what it needs to find agentbox's state).
func helperCommand(stateDir string, detach bool) *exec.Cmd {
	args := []string{"resident", "--state-dir", stateDir}
	if detach {
		args = append(args, "--detach")
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = []string{}
	return cmd
}

// Detach starts the helper for stateDir with this process's environment
// and returns without waiting for it: `agentbox resident --detach`, the
// intermediate process spawn runs.
func Detach(stateDir string) error {
	cmd := helperCommand(stateDir, false)
	cmd.Env = os.Environ()
	return cmd.Start()
}

// helperAlive reports whether a helper holds dir's lock.
func helperAlive(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// StopIdle stops the helper for stateDir if it runs no command, and waits
// until it has exited; a helper running commands is left to them (it
// exits once idle) after closing its idle sessions. A helper that cannot
// be asked (one that fails the peer check, started in another user
// namespace, or of another build, which no longer listens) is left too:
// it exits on its own when idle, and only the user knows whether what it
// runs may be killed.
func StopIdle(stateDir string) (StopOutcome, error) {
	dir := Dir(stateDir)
	if ident.CheckDir(dir) != nil || !helperAlive(dir) {
		return StopOutcome{}, nil
	}
	out := StopOutcome{Pid: lockPid(filepath.Join(dir, "lock"))}
	r, ok := askStopIdle(filepath.Join(dir, "sock"))
	switch {
	case !ok:
		// It may be exiting on its own (a replaced binary, idle).
		if waitGone(dir, 2*time.Second) {
			out.Stopped = true
			return out, nil
		}
		out.Why = "it does not answer (another build of agentbox, or started in another user namespace)"
		return out, nil
	case r.Kind == proto.KindBusy:
		out.Busy, out.Closed = r.Busy, r.Closed
		return out, nil
	}
	if !waitGone(dir, 10*time.Second) {
		return out, fmt.Errorf("the idle resident helper (lock %s) did not exit", filepath.Join(dir, "lock"))
	}
	out.Stopped = true
	return out, nil
}

// askStopIdle sends StopIdle to the helper at sock and returns its
// reply; false when there is no listener, it fails the peer check or it
// does not answer.
func askStopIdle(sock string) (*proto.Message, bool) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		return nil, false
	}
	if _, err := checkPeer(fd, false); err != nil {
		return nil, false
	}
	if send(fd, &proto.Message{Kind: proto.KindStopIdle}, nil) != nil {
		return nil, false
	}
	// Closing idle sessions takes a moment each; a helper that says
	// nothing in this long is not one that answers.
	tv := unix.NsecToTimeval(int64(30 * time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 4096)
	n, rfds, err := recvMsg(fd, buf, nil)
	closeAll(rfds)
	if err != nil || n == 0 {
		return nil, false
	}
	m, err := proto.Unmarshal(buf[:n], len(rfds))
	if err != nil || m.Kind != proto.KindStopped && m.Kind != proto.KindBusy {
		return nil, false
	}
	return m, true
}

func waitGone(dir string, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !helperAlive(dir) {
			return true
		}
	}
	return false
}

// lockPid is the pid the helper wrote in its lock file, 0 if none.
func lockPid(lockPath string) int {
	b, err := os.ReadFile(lockPath)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}
