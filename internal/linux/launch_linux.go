package linux

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// startError is a failure the init stage reported before the command ran:
// its message crossed the status pipe, so only the text of its chain is
// left.
func startError(code int, msg string) error {
	return &exitcode.Error{Code: code, Err: errors.New(msg)}
}

// Process is a running sandbox: the init stage and, under it, the command.
type Process struct {
	cmd    *exec.Cmd
	status *bufio.Reader
	file   *os.File
	// proxy holds the listeners of Spec.Net.Proxy, on the sandbox's loopback.
	proxy []net.Listener
	// resolver holds the name server's sockets of Spec.Net.Resolver.
	resolver *Resolver
	// ports holds what Spec.Net.HostPorts and Spec.Net.Publish handed over.
	ports *Ports
	// unreachable is what the command's connects could not reach, from
	// the init's last report.
	unreachable []spec.Unreachable
	// files and filesUnavailable are the file observer's, from the
	// init's last report.
	files            []fsreport.Denied
	filesUnavailable string
	// relay copies the streams agentbox relays (stdio_linux.go).
	relay     *stdioRelay
	waitDelay time.Duration
	// lifeline, in degraded mode, is the write end of the reaper's
	// lifeline (reap_linux.go): closing it ends the run.
	lifeline *os.File
	killOnce sync.Once
}

// Stdio is where the command's standard streams go, as in exec.Cmd, and
// how long Wait may wait for them to drain after the sandbox is gone.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	WaitDelay      time.Duration
}

// Start launches the init stage in fresh namespaces and waits until it
// has either started the command or failed to build the sandbox.
func Start(sp *spec.Spec, stdio Stdio) (*Process, error) {
	if bad := sp.NonUTF8(); bad != "" {
		return nil, errNonUTF8(bad)
	}
	// Host files and terminals never reach the command (stdio_linux.go).
	rel, err := newStdioRelay(stdio)
	if err != nil {
		return nil, fmt.Errorf("preparing the standard streams: %w", err)
	}
	o := stageStart{
		args: []string{spec.StageArg0}, env: []string{spec.StageEnv + "=" + spec.StageValue},
		stdin: rel.stdin, stdout: rel.stdout, stderr: rel.stderr, waitDelay: stdio.WaitDelay,
		proxy: sp.Net.Proxy, resolver: sp.Net.Resolver,
		started: rel.started,
		where:   "the sandbox", ended: "sandbox init ended before starting the command",
	}
	sp.Command.Pty, sp.Command.Reopen = nil, nil
	if !sp.Degraded.On {
		// Only a mount namespace makes a file reopened by path safer
		// than the caller's descriptor.
		sp.Command.Reopen = rel.reopen
	}
	if f := rel.ptyFile(); f != nil {
		sp.Command.Pty = rel.ptySpec(spec.StatusFD + 1 + len(o.files))
		o.files = append(o.files, f)
	}
	var lifeR, lifeW *os.File
	if sp.Degraded.On {
		// The reaper stage goes between us and the init (reap_linux.go).
		if lifeR, lifeW, err = os.Pipe(); err != nil {
			rel.abort()
			return nil, err
		}
		o.lifeline = lifeR
		o.args = []string{spec.ReaperArg0}
		// The reaper passes the init's environment on with the stage
		// mark set back to the init's.
		o.env = []string{spec.StageEnv + "=" + spec.ReaperValue}
	}
	st, ran, err := spawnStage(sp, o)
	if lifeR != nil {
		lifeR.Close()
	}
	if err != nil {
		if ran {
			rel.finish(stdio.WaitDelay)
		} else {
			rel.abort()
		}
		if lifeW != nil {
			lifeW.Close()
		}
		return nil, err
	}
	rel.commandStarted(st.ready.StdinReopened)
	return &Process{
		cmd: st.cmd, status: st.status, file: st.statusFile,
		proxy: st.proxy, resolver: st.resolver, ports: st.ports,
		relay: rel, waitDelay: stdio.WaitDelay, lifeline: lifeW,
	}, nil
}

// stageStart is how a lone run's init and a session's zygote differ at
// their start; spawnStage does the rest alike for both.
type stageStart struct {
	// args and env are the stage's argv and environment.
	args, env []string
	// files are inherited after the spec and status pipes, from fd 5.
	files []*os.File
	// The stage's standard streams, and how long Wait drains them.
	stdin          io.Reader
	stdout, stderr io.Writer
	waitDelay      time.Duration
	// proxy and resolver ask for the handover socketpair (Spec.Net.ProxyFD)
	// and say what arrives on it once the stage is ready.
	proxy, resolver bool
	// owners, with the handover, is the port owners table, inherited
	// after its socket (Spec.Session.PortOwnersFD).
	owners *os.File
	// lifeline, in degraded mode, is the read end of the reaper's
	// lifeline, inherited last (spec.InitFDsEnv).
	lifeline *os.File
	// started runs once the process runs, before its spec is sent.
	started func()
	// where names the sandbox in errors, and ended is the error when the
	// stage ends before it is ready.
	where, ended string
}

// readyStage is a started stage that reported ready: its process, its status
// pipe, its first message and what it handed over.
type readyStage struct {
	cmd        *exec.Cmd
	status     *bufio.Reader
	statusFile *os.File
	ready      spec.Message
	proxy      []net.Listener
	resolver   *Resolver
	ports      *Ports
}

// spawnStage starts this binary again as the stage for sp, in the
// namespaces initSysProcAttr names, sends it the spec and waits until it
// reports ready (Started) or fails; it then receives what the stage hands
// over. ran reports, with an error, whether the process had started: it
// is then killed and waited for.
func spawnStage(sp *spec.Spec, o stageStart) (st *readyStage, ran bool, err error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, false, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, false, err
	}
	attr := initSysProcAttr(sp)
	if o.lifeline != nil {
		// The reaper must outlive us long enough to sweep, so no
		// parent-death SIGKILL: it sees our death as the end of its
		// lifeline.
		attr.Pdeathsig = 0
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        o.args,
		Env:         o.env,
		Stdin:       o.stdin,
		Stdout:      o.stdout,
		Stderr:      o.stderr,
		WaitDelay:   o.waitDelay,
		ExtraFiles:  append([]*os.File{specR, statusW}, o.files...),
		SysProcAttr: attr,
	}
	var hand, ports *proxySocket
	if o.proxy || o.resolver {
		hand, err = prepareHandover(sp, cmd)
		if err == nil && o.owners != nil {
			cmd.ExtraFiles = append(cmd.ExtraFiles, o.owners)
			sp.Session.PortOwnersFD = 3 + len(cmd.ExtraFiles) - 1
		}
	}
	if err == nil {
		ports, err = preparePorts(sp, cmd)
	}
	if err != nil {
		hand.Close()
		specR.Close()
		specW.Close()
		statusR.Close()
		statusW.Close()
		return nil, false, err
	}
	defer hand.Close()
	defer ports.Close()
	// Once every descriptor is numbered in it.
	encoded, err := sp.Encode()
	if err != nil {
		specR.Close()
		specW.Close()
		statusR.Close()
		statusW.Close()
		return nil, false, fmt.Errorf("encoding the sandbox's spec: %w", err)
	}
	if o.lifeline != nil {
		// Last, after every descriptor meant for the init: the reaper
		// passes fds 3 to 3+n-1 on to it and keeps the next (spec.InitFDsEnv).
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", spec.InitFDsEnv, len(cmd.ExtraFiles)))
		cmd.ExtraFiles = append(cmd.ExtraFiles, o.lifeline)
	}
	err = cmd.Start()
	specR.Close()
	statusW.Close()
	hand.closeChildEnd()
	ports.closeChildEnd()
	if err != nil {
		specW.Close()
		statusR.Close()
		if !sp.Degraded.On && isUsernsRefusal(err) {
			return nil, false, &NoUsernsError{Err: err}
		}
		return nil, false, fmt.Errorf("starting %s: %w", o.where, err)
	}
	if o.started != nil {
		o.started()
	}
	go func() {
		// The stage reads the spec before anything else; a write error
		// only means it died, which the status pipe reports.
		specW.Write(encoded)
		specW.Close()
	}()
	st = &readyStage{cmd: cmd, status: bufio.NewReader(statusR), statusFile: statusR}
	fail := func(err error) (*readyStage, bool, error) {
		cmd.Process.Kill()
		cmd.Wait()
		statusR.Close()
		return nil, true, err
	}
	m, err := readMessage(st.status)
	if err == nil && m.Started && hand != nil {
		if st.proxy, st.resolver, err = hand.receive(o.proxy, o.resolver, sp.Net.Transparent); err != nil {
			what := "the name server's sockets"
			if o.proxy {
				what = "the proxy listeners"
			}
			return fail(fmt.Errorf("receiving %s from %s: %w", what, o.where, err))
		}
	}
	if err == nil && m.Started && ports != nil {
		if st.ports, err = receivePorts(ports, sp); err != nil {
			st.proxy, st.resolver = closeHandover(st.proxy, st.resolver)
			return fail(fmt.Errorf("receiving the host ports' listeners from %s: %w", o.where, err))
		}
	}
	if err != nil || !m.Started {
		cmd.Process.Kill()
		werr := cmd.Wait()
		statusR.Close()
		switch {
		case err == nil && m.NoUserns:
			return nil, true, &NoUsernsError{Err: errors.New(m.Error)}
		case err == nil && m.Error != "":
			return nil, true, startError(m.Code, m.Error)
		case err == nil:
			return nil, true, fmt.Errorf("%s sent an unexpected message: %+v", o.where, m)
		default:
			return nil, true, fmt.Errorf("%s (%v)", o.ended, werr)
		}
	}
	st.ready = m
	return st, true, nil
}

func (p *Process) next() (spec.Message, error) { return readMessage(p.status) }

// Wait waits for the command; when it returns, the sandbox and every
// process in it are gone. It returns the command's exit status and the
// signal that killed it, if any.
func (p *Process) Wait() (code, signal int, err error) {
	m, merr := p.next()
	werr := p.cmd.Wait()
	cerr := p.relay.finish(p.waitDelay)
	p.file.Close()
	if p.lifeline != nil {
		p.killOnce.Do(func() { p.lifeline.Close() })
	}
	if merr == nil && m.Exited {
		p.unreachable = m.Unreachable
		p.files, p.filesUnavailable = m.Files, m.FilesUnavailable
		if cerr != nil && m.Status == 0 && m.Signal == 0 {
			// As os/exec: a lost output is the error of a command that
			// otherwise succeeded.
			return 0, 0, fmt.Errorf("copying the command's output: %w", cerr)
		}
		return m.Status, m.Signal, nil
	}
	// No report: the init stage itself was killed (timeout, cancel, or
	// someone else). Its own fate is the best answer we have.
	if ps := p.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			if ws.Signaled() {
				return 0, int(ws.Signal()), nil
			}
			return ws.ExitStatus(), 0, nil
		}
	}
	return 0, 0, fmt.Errorf("waiting for the sandbox: %w", errors.Join(merr, werr))
}

// Pid is the host process ID of the init stage (in degraded mode, of the
// reaper stage above it): the process Start started.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal forwards sig to the command through the init stage.
func (p *Process) Signal(sig os.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Kill ends the sandbox: killing its PID 1 kills every process in it. In
// degraded mode there is no pid namespace to do that: closing the lifeline
// asks the reaper to sweep the tree, and Wait returns once it has.
func (p *Process) Kill() error {
	if p.lifeline != nil {
		p.killOnce.Do(func() { p.lifeline.Close() })
		return nil
	}
	return p.cmd.Process.Kill()
}

// NoUsernsError means the kernel, a security module or a container
// runtime refused the user namespace the sandbox is built in.
type NoUsernsError struct{ Err error }

func (e *NoUsernsError) Error() string {
	return "user namespaces are unavailable: " + UsernsReason(e.Err)
}

func (e *NoUsernsError) Unwrap() error { return e.Err }

// isUsernsRefusal recognises the errors clone(CLONE_NEWUSER) and writing
// the id maps fail with when user namespaces are forbidden.
func isUsernsRefusal(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)
}

// UsernsReason names why user namespaces are refused, as precisely as the
// system lets us tell; err is the kernel's refusal, if any.
func UsernsReason(err error) string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	unpriv := os.Getuid() != 0
	switch {
	case read("/proc/sys/user/max_user_namespaces") == "0":
		return "the sysctl user.max_user_namespaces is 0"
	case unpriv && read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return "the sysctl kernel.unprivileged_userns_clone is 0"
	case unpriv && read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
	case err != nil && underSeccomp():
		return fmt.Sprintf("%v: agentbox runs under a seccomp filter that refuses them (a container runtime's profile, such as Docker's default); allow unshare and clone with CLONE_NEWUSER in the container's profile, or run with Options.AllowDegraded", err)
	case err != nil:
		return fmt.Sprintf("%v (a container runtime or seccomp policy may forbid them)", err)
	}
	return "unknown reason"
}

// initSysProcAttr is how the init stage for sp is started: its
// namespaces, id maps and the capabilities it keeps across exec. A lone
// run's init and a session's zygote (session_linux.go) start alike.
func initSysProcAttr(sp *spec.Spec) *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	attr := &syscall.SysProcAttr{
		// No controlling terminal: TIOCSTI into the caller's terminal is
		// impossible, and the sandbox cannot signal the caller's group.
		Setsid: true,
		// If agentbox dies, so does the sandbox (and with its PID 1, the
		// whole pid namespace).
		Pdeathsig: syscall.SIGKILL,
	}
	if !sp.Degraded.On {
		flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
		if !sp.Net.Network {
			flags |= unix.CLONE_NEWNET
		}
		attr.Cloneflags = flags
		// The command keeps the caller's uid and gid, so file ownership
		// and tools such as git's safe.directory check look the same.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	if uid != 0 && !sp.Degraded.On {
		// A non-root uid loses the namespace's capabilities at exec; keep
		// exactly those the init stage needs, as ambient capabilities,
		// until it drops them all before the command starts.
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP}
		if sp.Net.Resolver || slices.ContainsFunc(sp.Net.HostPorts, func(p uint16) bool { return p < 1024 }) {
			// The name server's port 53 (listenResolver), a host
			// port below 1024 (setupPorts).
			attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_NET_BIND_SERVICE)
		}
		if len(sp.FS.Caches) > 0 {
			// overlayfs works in its mode-000 work directory with the
			// mounter's credentials; the namespace's DAC override
			// covers only the user's own files.
			attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_DAC_OVERRIDE)
		}
	}
	return attr
}

// Files is what the file observer saw the sandbox refuse the command, and
// when it did not run, why (empty when it ran, or when the command's end
// was not reported). Call it after Wait.
func (p *Process) Files() ([]fsreport.Denied, string) {
	return p.files, p.filesUnavailable
}

// underSeccomp reports whether a seccomp filter already confines this
// process (a container runtime's, typically): the likely reason a user
// namespace is refused with EPERM when no sysctl forbids it.
func underSeccomp() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Seccomp:"); ok {
			return strings.TrimSpace(v) == "2"
		}
	}
	return false
}
