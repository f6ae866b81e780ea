package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// approveSession is a prepared session for a fresh workspace and a
// directory outside every writable root (/var/tmp is none; /tmp is
// private in the sandbox).
func approveSession(t *testing.T) (*Session, string) {
	t.Helper()
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	pol, err := policytest.Resolve(policy.Options{Cwd: ws}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.MkdirTemp("/var/tmp", "agentbox-approve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	out, _ = filepath.EvalSymlinks(out)
	return sessionFor(t, pol), out
}

func touch(s *Session, req *Request, path string) error {
	c := s.Command(context.Background(), "touch", path)
	c.Request = req
	return c.Run()
}

func refused(t *testing.T, err error, unhonourable bool) {
	t.Helper()
	var se *StartError
	var re *RefusedError
	if !errors.As(err, &se) || se.Code != CodeSandboxFailure || !errors.As(err, &re) || re.Unhonourable != unhonourable {
		t.Errorf("error %v, want a *StartError 125 with a *RefusedError (unhonourable %v)", err, unhonourable)
	}
}

func absent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is on the host (%v)", p, err)
	}
}

// TestSessionApprove: a nil hook refuses; Once widens the one command
// (checked on the host), ForSession every later one, through a prepared
// sandbox of its own; the hook sees the command and a copy it cannot use
// to widen anything; a request the policy cannot honour is refused
// without asking; a lone command cannot ask.
func TestSessionApprove(t *testing.T) {
	s, out := approveSession(t)
	req := &Request{AddDirs: []string{out}, Reason: "test"}
	refused(t, touch(s, req, out+"/nil-hook"), false)
	if err := touch(s, req, out+"/nil-hook"); !errors.Is(err, ErrNoApprover) {
		t.Errorf("nil hook: %v", err)
	}
	absent(t, out+"/nil-hook")

	var asked atomic.Int32
	scope := Once
	s.Approve = func(ctx context.Context, r Request) (Grant, error) {
		asked.Add(1)
		if !slices.Equal(r.Command, []string{"touch", out + "/" + filepath.Base(r.Command[1])}) || r.Reason != "test" {
			t.Errorf("the hook's request: %+v", r)
		}
		r.AddDirs[0] = "/" // changes nothing
		return Grant{Scope: scope}, nil
	}
	if err := touch(s, req, out+"/once"); err != nil {
		t.Fatalf("once: %v", err)
	}
	if _, err := os.Stat(out + "/once"); err != nil {
		t.Error(err)
	}
	if req.AddDirs[0] != out {
		t.Errorf("the caller's request was changed: %v", req.AddDirs)
	}
	if err := touch(s, nil, out+"/after-once"); err == nil {
		t.Error("a command after a once grant wrote outside")
	}
	absent(t, out+"/after-once")
	if s.Policy().IsWritable(out) {
		t.Error("a once grant widened the session's policy")
	}

	// Refused without asking.
	n := asked.Load()
	for _, d := range []string{"/", "/etc", "relative", out + "/missing"} {
		refused(t, touch(s, &Request{AddDirs: []string{d}}, s.Policy().Cwd()+"/ran"), true)
	}
	refused(t, touch(s, &Request{AllowDomains: []string{"*"}}, s.Policy().Cwd()+"/ran"), true)
	absent(t, s.Policy().Cwd()+"/ran")
	if asked.Load() != n {
		t.Error("the hook was asked about a request the policy cannot honour")
	}

	// An error from the hook refuses.
	s.Approve = func(context.Context, Request) (Grant, error) { return Grant{}, errors.New("no") }
	refused(t, touch(s, req, out+"/hook-error"), false)
	absent(t, out+"/hook-error")

	// A command still running in the first prepared sandbox when the
	// session grant comes keeps it, and its end closes it.
	old := s.impl
	slow := s.Command(context.Background(), "sh", "-c", "sleep 1; touch ran-on")
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	s.Approve = func(context.Context, Request) (Grant, error) { return Grant{Scope: ForSession}, nil }
	if err := touch(s, req, out+"/session"); err != nil {
		t.Fatalf("session: %v", err)
	}
	select {
	case <-old.done():
		t.Error("the first prepared sandbox closed under a running command")
	default:
	}
	if err := slow.Wait(); err != nil {
		t.Errorf("the command in the first prepared sandbox: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Policy().Cwd(), "ran-on")); err != nil {
		t.Error(err)
	}
	select {
	case <-old.done():
	case <-time.After(10 * time.Second):
		t.Error("the first prepared sandbox outlived its last command")
	}
	select {
	case <-s.Done():
		t.Error("the session ended with its earlier prepared sandbox")
	default:
	}
	if !s.Policy().IsWritable(out) || !s.Prepared() {
		t.Errorf("after a session grant: writable %v, prepared %v", s.Policy().IsWritable(out), s.Prepared())
	}
	s.Approve = nil // covered: no one is asked
	for _, name := range []string{"later", "covered"} {
		r := req
		if name == "later" {
			r = nil
		}
		if err := touch(s, r, out+"/"+name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A protected name in the granted directory stays read-only.
	os.Mkdir(out+"/.git", 0o755)
	if err := touch(s, nil, out+"/.git/config"); err == nil {
		t.Error("wrote .git/config in a granted directory")
	}
	absent(t, out+"/.git/config")

	lone := Command(s.Policy(), "touch", out+"/lone")
	lone.Request = req
	refused(t, lone.Run(), false)
}
