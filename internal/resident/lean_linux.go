package resident

import (
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/resident/fastpath"
	"github.com/agentbox/agentbox/policy"
)

// serveLean serves a lean client's request (package fastpath): the
// policy is resolved here, exactly as the client's full CLI would have
// resolved it, from the client's arguments, directory, environment,
// executable and argv[0]; the run then goes the way of the CLI's own
// requests, the same checks and the same key.
func (s *server) serveLean(fd int, lr *fastpath.Request, fds []int) {
	out := leanReplies{}
	defer func() {
		// The helper parses the client's flags, config and git files
		// now: a bug there must not end the helper and every other
		// client's command with it. Nothing ran yet if it panicked
		// before start; the full CLI then reports what it finds.
		if r := recover(); r != nil {
			out.fallback(fd, fmt.Sprintf("internal error: %v", r))
		}
	}()
	if len(fds) != 3 || len(lr.Args) < 2 || !strings.HasPrefix(lr.Dir, "/") || !strings.HasPrefix(lr.Executable, "/") {
		closeAll(fds)
		out.fallback(fd, "malformed request")
		return
	}
	stdio := stdioFiles(fds)
	defer closeStdio(&stdio)
	// The cheap refusals before resolving anything.
	req := &runRequest{Op: "run", Binary: lr.Binary, StateDir: lr.StateDir, Umask: lr.Umask, Rlimits: lr.Rlimits, Env: lr.Env}
	req.Argv = []string{"?"}
	if why := s.mismatch(req); why != "" {
		out.fallback(fd, why)
		return
	}
	if s.resolve == nil {
		out.fallback(fd, "this helper serves no lean client")
		return
	}
	env := make(map[string]string, len(lr.Env))
	for _, kv := range lr.Env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				// The first wins, as for os.Getenv (os.Environ has
				// no duplicates anyway).
				if _, dup := env[kv[:i]]; !dup {
					env[kv[:i]] = kv[i+1:]
				}
				break
			}
		}
	}
	caller := policy.Caller{Getenv: func(k string) string { return env[k] },
		Dir: lr.Dir, Executable: lr.Executable, Remote: true, Arg0: lr.Args[0]}
	run, why := s.resolve(lr.Args[1:], caller)
	if run == nil {
		out.fallback(fd, why)
		return
	}
	if len(run.Argv) == 0 || !Eligible(run.Policy, stdio) {
		out.fallback(fd, "not a run the helper serves")
		return
	}
	polBytes, err := run.Policy.MarshalBinary()
	if err != nil {
		out.fallback(fd, err.Error())
		return
	}
	req.Argv, req.Timeout, req.Roots = run.Argv, int64(run.Timeout), rootIDs(run.Policy)
	out.finish = run.Finish
	s.start(fd, req, polBytes, stdio, out)
}

// replier is how the helper answers a request: as the CLI's resident
// client reads it, or as the lean one does.
type replier interface {
	fallback(fd int, why string) error
	started(fd int) error
	exited(fd int, r reply) error
}

type jsonReplies struct{}

func (jsonReplies) fallback(fd int, why string) error { return sendJSON(fd, reply{Fallback: why}) }
func (jsonReplies) started(fd int) error              { return sendJSON(fd, reply{Started: true}) }
func (jsonReplies) exited(fd int, r reply) error      { return sendJSON(fd, r) }

// leanReplies answers a lean client, which writes what the CLI would have
// written and exits as it would have: the helper does the CLI's part.
type leanReplies struct {
	finish func(*Result) (string, int)
}

func (leanReplies) fallback(fd int, why string) error {
	return sendMsg(fd, fastpath.Fallback(why), nil)
}

func (leanReplies) started(fd int) error { return sendMsg(fd, fastpath.Started(), nil) }

func (l leanReplies) exited(fd int, r reply) error {
	stderr, code := l.finish(&r.Result)
	for _, m := range fastpath.Exited(code, stderr) {
		if err := sendMsg(fd, m, nil); err != nil {
			return err
		}
	}
	return nil
}
