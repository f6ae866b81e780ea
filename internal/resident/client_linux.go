package resident

import (
	"encoding/json"
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

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/policy"
)

// Run runs the command through the helper for stateDir when it can, and
// says so with handled. When handled is false nothing ran and the caller
// runs the command itself, as it would have without a helper; the helper
// is then started for the next run if none is alive. stdin, stdout and
// stderr must be what the command gets; sigs carries the signals to relay.
func Run(stateDir string, pol *policy.Policy, argv []string, timeout time.Duration, stdio [3]*os.File, sigs <-chan os.Signal) (res *Result, handled bool) {
	if !Eligible(pol, stdio) {
		return nil, false
	}
	dir := Dir(stateDir)
	sock := filepath.Join(dir, "sock")
	if len(sock) >= 108 || checkDir(dir) != nil {
		if errors.Is(checkDir(dir), os.ErrNotExist) {
			spawn(stateDir)
		}
		return nil, false
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			spawn(stateDir)
		}
		return nil, false
	}
	// The listener must be the helper, not a socket a sandboxed process
	// put there (a degraded command may write the state directory when
	// the workspace holds it).
	if _, err := checkPeer(fd, false); err != nil {
		return nil, false
	}
	binary, err := ident.Binary()
	if err != nil {
		return nil, false
	}
	b, err := EncodeRequest(stateDir, binary, pol, argv, os.Environ(), timeout)
	if err != nil {
		return nil, false
	}
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	if err := sendMsg(fd, b, fds); err != nil {
		return nil, false
	}
	buf := make([]byte, 64<<10)
	var r reply
	n, rfds, err := recvMsg(fd, buf, nil)
	closeAll(rfds)
	if err != nil || n == 0 || json.Unmarshal(buf[:n], &r) != nil || !r.Started {
		// Nothing started (the helper says so before it starts
		// anything): run it ourselves.
		return nil, false
	}
	// From here on the command runs: the helper's answer is the run's.
	defer contract.Relay(sigs, func(s os.Signal) {
		if ss, ok := s.(syscall.Signal); ok {
			sendJSON(fd, control{Op: "signal", Sig: int(ss)})
		}
	})()
	for {
		n, rfds, err = recvMsg(fd, buf, nil)
		closeAll(rfds)
		if err != nil || n == 0 {
			why := "connection lost"
			if err != nil {
				why = err.Error()
			}
			return &Result{Failed: fmt.Sprintf("the resident helper ended while the command ran (%s); its sandbox was killed with it", why)}, true
		}
		r = reply{}
		if json.Unmarshal(buf[:n], &r) == nil && r.Exited {
			return &r.Result, true
		}
	}
}

// EncodeRequest is the message a CLI whose executable has the identity
// binary (see [BinaryID]) sends to run argv under pol, its stdio passed
// along as SCM_RIGHTS. The escape tests send it from inside sandboxes:
// it is exactly what the helper would serve from an unconfined peer.
func EncodeRequest(stateDir, binary string, pol *policy.Policy, argv, env []string, timeout time.Duration) ([]byte, error) {
	polBytes, err := pol.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if env == nil {
		env = []string{}
	}
	req := &runRequest{Op: "run", Binary: binary, StateDir: stateDir, Roots: rootIDs(pol), Argv: argv, Env: env, Timeout: int64(timeout)}
	if req.Umask, err = ident.Umask(); err != nil {
		return nil, err
	}
	if req.Rlimits, err = ident.Rlimits(); err != nil {
		return nil, err
	}
	return encodeRequest(req, polBytes)
}

// BinaryID is the identity of the executable at path, as the helper
// compares it with its own.
func BinaryID(path string) (string, error) {
	return ident.FileID(path)
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
	if checkDir(dir) != nil {
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
	if checkDir(dir) != nil || !helperAlive(dir) {
		return StopOutcome{}, nil
	}
	out := StopOutcome{Pid: lockPid(filepath.Join(dir, "lock"))}
	r, ok := ask(filepath.Join(dir, "sock"), "stop-idle")
	switch {
	case !ok:
		// It may be exiting on its own (a replaced binary, idle).
		if waitGone(dir, 2*time.Second) {
			out.Stopped = true
			return out, nil
		}
		out.Why = "it does not answer (another build of agentbox, or started in another user namespace)"
		return out, nil
	case !r.Exited:
		out.Busy, out.Closed = r.Busy, r.Closed
		return out, nil
	}
	if !waitGone(dir, 10*time.Second) {
		return out, fmt.Errorf("the idle resident helper (lock %s) did not exit", filepath.Join(dir, "lock"))
	}
	out.Stopped = true
	return out, nil
}

// ask sends op to the helper at sock and returns its reply; false when
// there is no listener, it fails the peer check or it does not answer.
func ask(sock, op string) (reply, bool) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return reply{}, false
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		return reply{}, false
	}
	if _, err := checkPeer(fd, false); err != nil {
		return reply{}, false
	}
	b, _ := encodeRequest(&runRequest{Op: op}, nil)
	if sendMsg(fd, b, nil) != nil {
		return reply{}, false
	}
	// Closing idle sessions takes a moment each; a helper that says
	// nothing in this long is not one that answers.
	tv := unix.NsecToTimeval(int64(30 * time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 4096)
	n, rfds, err := recvMsg(fd, buf, nil)
	closeAll(rfds)
	var r reply
	if err != nil || n == 0 || json.Unmarshal(buf[:n], &r) != nil {
		return reply{}, false
	}
	return r, true
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
