package sandbox

import (
	"context"
	"errors"
	"sync"

	"github.com/agentbox/agentbox/policy"
)

// Session prepares a policy once and runs many commands under it, each as
// isolated as a lone [Cmd]: on Linux the sandbox (policy resolution,
// namespaces and the mount tree) is built once, and each command is forked
// from it in a pid namespace of its own with fresh capability, Landlock
// and seccomp state and its own stdio. The placeholders that keep missing
// protected names free are each command's own, as a lone run's are: made
// on the host before it starts and removed when it has ended, so none is
// on the host between commands. A command in a session costs a fraction
// of a lone run; see the README for figures.
//
// # What the commands of one session share
//
// The filesystem view (writes to the workspace, /tmp and the other
// writable roots are visible to later commands, as they are on the host),
// the network namespace (with the network off, one private loopback: a
// command can reach a server that another command of the session runs at
// the same time; nothing outlives its command, so no listener is left for
// later ones), the UTS namespace, the session's private /dev/shm, and the
// tool caches' copy-on-write layer (a cache one command fills is there for
// the next; the host's cache is never written). Each command has its own
// IPC namespace: System V IPC objects and POSIX message queues die with
// the command that made them. Within a session,
// /proc lists the processes of every command running at the time, and the
// session's own init as PID 1; they cannot be signalled, traced or read
// from (each command has its own pid namespace and Landlock domain, and
// the init is not dumpable; on a kernel without Landlock, commands running
// at the same time can read each other's /proc entries: they are the same
// user's, under the same policy). A lone run starts clean on all of
// these.
//
// With a network allow-list, the session's proxy runs in the calling
// process from NewSession to Close, and serves each command on two
// listeners of its own in the session's network namespace, made before
// the command starts and closed when it ends; the command's proxy
// variables name them, and its [Cmd.Report] holds exactly the decisions
// made on them. The namespace is shared, so a command that connects to
// another running command's proxy ports (it can find them, as it can
// find any server a sibling runs) is served under the same policy but
// counted in that other command's report: attribution is exact for
// commands that use their own proxy variables, and nothing is reachable
// that the policy refuses.
//
// With the network off, the same holds for the refusing proxy of a
// sandbox without network, and the session's one name server counts
// each look-up for the command whose socket asked (by the socket's
// port, which that command's connect supervisor recorded); a resolver
// that sends without connecting its socket is counted for the one
// command running, or for none while several run.
//
// Where the kernel refuses user namespaces (the degraded mode), when the
// policy is danger-full-access, and on Windows and macOS, a Session still
// works but starts each command exactly as a lone [Cmd] would (with an
// allow-list: a proxy of its own on the host's loopback for each
// command).
//
// # Asking for more
//
// A command may ask for more than the session's policy allows
// ([Cmd.Request]: directories to write beneath, domains to reach). The
// session's [Session.Approve] hook decides; a nil hook refuses, and so
// does the policy itself for what it could never grant (a root that
// confines nothing, a denied domain), without asking. A grant [Once]
// runs that command alone under the widened policy, as a lone [Cmd];
// one [ForSession] widens the session's policy for every later command,
// with a prepared sandbox of its own (the earlier one is kept for the
// commands still running in it, and closed when the last has ended).
//
// A Session is safe for concurrent use. Close ends every command still
// running and releases what the session holds; if the calling process
// dies, the session's sandbox dies with it.
type Session struct {
	// Approve, when set, decides on the [Request] of a command
	// ([Cmd.Request]) that wants more than the session's policy allows:
	// it asks whoever may grant it (a human: the MCP server asks its
	// client's user) and returns the grant, or an error to refuse. It is
	// called only for requests the policy can honour and does not
	// already cover, on the goroutine starting the command, with the
	// command's context; several may run at once. nil refuses every
	// request. Set it before the first command starts.
	Approve func(ctx context.Context, r Request) (Grant, error)

	init string // the prepared commands' PID 1 (SessionOptions.CommandInit)

	growMu sync.Mutex // one session grant at a time

	mu     sync.Mutex
	closed bool
	cur    *policy.Policy // the session's policy, widened by the grants for the session
	impl   sessionImpl    // cur's prepared sandbox; nil: each command starts on its own
	// impls are the prepared sandboxes of the policies the session has
	// had: the current one, and earlier ones while commands still run in
	// them (the last one out closes it); running counts those commands.
	impls   map[*policy.Policy]sessionImpl
	running map[sessionImpl]int
	ended   chan struct{} // closed by Close
	died    chan struct{} // see Done
	dieOnce sync.Once
	unwatch []func() // end the session's share of the roots' watchers
}

// sessionImpl is a backend's prepared sandbox.
type sessionImpl interface {
	// start starts c in the prepared sandbox, filling p and pushing
	// what the command holds on p.cleanup.
	start(c *Cmd, p *proc) error
	close() error
	// done is closed when the prepared sandbox has ended, expectedly or
	// not.
	done() <-chan struct{}
}

// Prepared reports whether the session's commands start from a sandbox
// prepared once (a zygote), rather than each as a lone [Cmd] (degraded
// mode, an allow-list, danger-full-access, other platforms). agentbox's
// resident helper serves only prepared sessions: for the others it would
// only add a hop.
func (s *Session) Prepared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.impl != nil
}

// ErrSessionClosed is returned by commands started after Close.
var ErrSessionClosed = errors.New("sandbox: session closed")

// NewSession prepares pol for many commands. Errors are those a lone
// command's Start would report (a *StartError for a policy that cannot be
// enforced).
func NewSession(pol *policy.Policy) (*Session, error) {
	return NewSessionWith(pol, SessionOptions{})
}

// SessionOptions are a session's choices beyond its policy.
type SessionOptions struct {
	// CommandInit, when set, is the path of an executable that links this
	// package: on Linux each prepared command then runs under it as PID 1
	// of its pid namespace (a small init that forwards signals, reaps
	// orphans and reports once the command's tree is gone), started from
	// the command's prepared thread before the command is asked for.
	// Without it a prepared command is PID 1 itself: the kernel drops a
	// default-action signal sent to it from inside (kill -TERM $$,
	// SIGPIPE), and one relayed from outside is replaced by SIGKILL.
	// agentbox's resident helper sets it; it costs the init's start,
	// which the helper pays before the request comes.
	CommandInit string
}

// NewSessionWith is [NewSession] with options.
func NewSessionWith(pol *policy.Policy, o SessionOptions) (*Session, error) {
	if pol == nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: errors.New("sandbox: no policy")}
	}
	return newSessionInit(pol, o.CommandInit)
}

// newSessionInit is NewSession; with init, each prepared command runs
// under that executable as its PID 1 ([SessionOptions].CommandInit).
func newSessionInit(pol *policy.Policy, init string) (*Session, error) {
	if err := checkPorts(pol); err != nil {
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	impl, err := newSession(pol, init)
	if err != nil {
		return nil, err
	}
	// A watcher of the writable roots for the session's life, so that
	// the check after each command looks only where something changed.
	s := &Session{init: init, cur: pol, impl: impl, impls: map[*policy.Policy]sessionImpl{pol: impl}, running: map[sessionImpl]int{},
		ended: make(chan struct{}), died: make(chan struct{}), unwatch: []func(){watchRoots(pol)}}
	s.watch(impl)
	return s, nil
}

// watch ends the session (see Done) when impl dies while it is the
// session's current prepared sandbox.
func (s *Session) watch(impl sessionImpl) {
	if impl == nil {
		return
	}
	go func() {
		select {
		case <-impl.done():
			s.mu.Lock()
			current := s.impl == impl
			s.mu.Unlock()
			if current {
				s.dieOnce.Do(func() { close(s.died) })
			}
		case <-s.ended:
		}
	}()
}

// Done is closed when the session can run no more commands: after Close,
// or when its prepared sandbox died (killed from outside, say). A server
// holding a session, such as `agentbox mcp`, ends then rather than fail
// every later command.
func (s *Session) Done() <-chan struct{} { return s.died }

// Policy is the policy the session's commands run under: the one it was
// made with, widened by every [Request] granted [ForSession] so far.
func (s *Session) Policy() *policy.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Command returns a Cmd for name with args in the session. As with
// [CommandContext], the end of ctx kills the command and its whole tree.
// The Cmd's Policy field is the session's and must not be changed: Start
// sets it to the policy the command runs under (the session's then, or
// that widened by the command's granted [Cmd.Request]).
func (s *Session) Command(ctx context.Context, name string, args ...string) *Cmd {
	if ctx == nil {
		panic("sandbox: nil Context")
	}
	c := CommandContext(ctx, s.Policy(), name, args...)
	c.session = s
	c.sessionPol = c.Policy
	return c
}

func (s *Session) start(c *Cmd, p *proc) error {
	s.mu.Lock()
	closed := s.closed
	// The prepared sandbox of the command's policy; a policy widened for
	// this command alone has none, and the command starts as a lone one
	// would under it.
	impl := s.impls[c.Policy]
	if !closed && impl != nil {
		s.running[impl]++
	}
	s.mu.Unlock()
	if closed {
		return &StartError{Code: CodeSandboxFailure, Err: ErrSessionClosed}
	}
	if impl == nil {
		return start(c, p)
	}
	// The first step pushed is the last run: the command's own releases
	// (into impl's pool) come before impl may be closed.
	p.cleanup.add(func() { s.left(impl) })
	return impl.start(c, p)
}

// left is a command of impl gone (or never started): an earlier prepared
// sandbox that no command runs in any more is closed.
func (s *Session) left(impl sessionImpl) {
	s.mu.Lock()
	s.running[impl]--
	retire := s.retire(impl)
	s.mu.Unlock()
	if retire {
		impl.close()
	}
}

// retire reports whether impl is an earlier prepared sandbox no command
// runs in, and if so forgets it for the caller to close. s.mu is held.
func (s *Session) retire(impl sessionImpl) bool {
	if s.closed || impl == s.impl || s.running[impl] > 0 {
		return false
	}
	for p, i := range s.impls {
		if i == impl {
			delete(s.impls, p)
			delete(s.running, impl)
			return true
		}
	}
	return false
}

// Close ends the session: commands still running are killed with their
// whole trees, and everything the session holds is released. It is safe
// to call more than once.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.ended)
	impls := s.impls
	unwatch := s.unwatch
	s.mu.Unlock()
	defer s.dieOnce.Do(func() { close(s.died) })
	defer func() {
		for _, u := range unwatch {
			u()
		}
	}()
	var errs []error
	for _, impl := range impls {
		if impl != nil {
			errs = append(errs, impl.close())
		}
	}
	return errors.Join(errs...)
}
