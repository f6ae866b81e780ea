package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/policy"
)

// Request is more than a session's policy allows, asked for one command
// ([Cmd.Request]): directories to write beneath and network destinations
// to reach. Only the session's [Session.Approve] hook can grant it, and
// it grants exactly what is asked, or nothing.
type Request struct {
	// AddDirs are absolute directories to make writable roots, each
	// refused as [policy.Options].AddDirs would be when it confines
	// nothing (/, the home, a system directory) or does not exist. The
	// Approve hook is asked about, and the grant holds, each with its
	// symlinks resolved.
	AddDirs []string
	// AllowDomains are allow-list patterns ("name", "*.suffix",
	// "name:port", IP, CIDR); one the policy's denied_domains refuses is
	// refused.
	AllowDomains []string
	// Reason is why the command needs it, in the asker's words, for
	// whoever approves.
	Reason string
	// Command is the command line that asks (Cmd.Args), set by Start for
	// the Approve hook; what a caller puts here is replaced.
	Command []string
}

// Scope is how long an approved [Request] lasts.
type Scope int

const (
	// Once grants the request to the command that asked and no other.
	Once Scope = iota + 1
	// ForSession grants it to that command and to every command of the
	// session started after it.
	ForSession
)

func (s Scope) String() string {
	switch s {
	case Once:
		return "once"
	case ForSession:
		return "session"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Grant is an approval of a Request.
type Grant struct {
	Scope Scope
}

// RefusedError is a [Request] that was not granted: the start error's Err
// of a command that asked for it (with [CodeSandboxFailure]); the command
// did not run.
type RefusedError struct {
	Request Request
	// Unhonourable is set when the policy cannot grant the request
	// whoever approves (a root that confines nothing, a denied domain):
	// no one was asked.
	Unhonourable bool
	Err          error
}

func (e *RefusedError) Error() string {
	what := describeRequest(e.Request)
	if e.Unhonourable {
		return fmt.Sprintf("sandbox: cannot grant %s: %v", what, e.Err)
	}
	return fmt.Sprintf("sandbox: %s not granted: %v", what, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// ErrNoApprover is a RefusedError's Err in a session without an
// [Session.Approve] hook.
var ErrNoApprover = errors.New("the session has no one to approve it (no Approve hook)")

// describeRequest names what r asks for.
func describeRequest(r Request) string {
	var parts []string
	if len(r.AddDirs) > 0 {
		parts = append(parts, "writing beneath "+strings.Join(r.AddDirs, ", "))
	}
	if len(r.AllowDomains) > 0 {
		parts = append(parts, "reaching "+strings.Join(r.AllowDomains, ", "))
	}
	if len(parts) == 0 {
		return "an empty request"
	}
	return strings.Join(parts, " and ")
}

func (r *Request) widening() policy.Widening {
	return policy.Widening{AddDirs: r.AddDirs, AllowDomains: r.AllowDomains}
}

// policyFor is the policy c runs under: the session's current one, or,
// with a request, that widened once the request is approved. A request
// the current policy already covers needs no approval; one it cannot
// honour is refused without asking.
func (s *Session) policyFor(ctx context.Context, req *Request, args []string) (*policy.Policy, error) {
	cur := s.Policy()
	if req == nil {
		return cur, nil
	}
	r := *req
	// The directories as they are, not as they are spelled: the one
	// who approves sees, and the grant holds, the directory a symlink
	// leads to, and a link changed after the approval changes nothing.
	r.AddDirs = nil
	for _, d := range req.AddDirs {
		if filepath.IsAbs(d) {
			if real, err := filepath.EvalSymlinks(d); err == nil {
				d = real
			}
		}
		if !slices.Contains(r.AddDirs, d) {
			r.AddDirs = append(r.AddDirs, d)
		}
	}
	r.AllowDomains = slices.Clone(r.AllowDomains)
	r.Command = slices.Clone(args)
	req = &r
	w := req.widening()
	if w.Empty() || cur.Covers(w) {
		return cur, nil
	}
	refuse := func(unhonourable bool, err error) error {
		return &StartError{Code: CodeSandboxFailure, Err: &RefusedError{Request: *req, Unhonourable: unhonourable, Err: err}}
	}
	wide, err := cur.Widen(w)
	if err != nil {
		return nil, refuse(true, err)
	}
	if s.Approve == nil {
		return nil, refuse(false, ErrNoApprover)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// A copy: what the hook does with its argument changes nothing.
	ask := *req
	ask.AddDirs, ask.AllowDomains, ask.Command = slices.Clone(req.AddDirs), slices.Clone(req.AllowDomains), slices.Clone(req.Command)
	g, err := s.Approve(ctx, ask)
	if err != nil {
		return nil, refuse(false, err)
	}
	switch g.Scope {
	case Once:
		return wide, nil
	case ForSession:
		p, err := s.grow(w)
		if err != nil {
			return nil, refuse(false, err)
		}
		return p, nil
	}
	return nil, refuse(false, fmt.Errorf("the approval has no scope (%v)", g.Scope))
}

// grow widens the session's policy by w for its later commands: a
// prepared sandbox of its own is made for the widened policy; the one
// before stays for the commands still running in it, and is closed when
// the last of them is gone.
func (s *Session) grow(w policy.Widening) (*policy.Policy, error) {
	s.growMu.Lock()
	defer s.growMu.Unlock()
	// From the policy now: another grant may have widened it since this
	// one was asked.
	wide, err := s.Policy().Widen(w)
	if err != nil {
		return nil, err
	}
	impl, err := newSession(wide, s.init)
	if err != nil {
		return nil, err
	}
	unwatch := watchRoots(wide)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		unwatch()
		if impl != nil {
			impl.close()
		}
		return nil, ErrSessionClosed
	}
	old := s.impl
	s.cur, s.impl = wide, impl
	s.impls[wide] = impl
	s.unwatch = append(s.unwatch, unwatch)
	// The earlier prepared sandbox goes once no command runs in it.
	retire := old != nil && s.retire(old)
	s.mu.Unlock()
	if retire {
		old.close()
	}
	s.watch(impl)
	return wide, nil
}
