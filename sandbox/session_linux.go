package sandbox

import (
	"errors"
	"os"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/policy"
)

// linuxSession is a session's zygote and what it holds for the session's
// whole life: placeholders, git-writes placeholders and the tool caches'
// copy-on-write layers (one layer for all the session's commands).
type linuxSession struct {
	z   *linux.Session
	ph  *linux.Placeholders
	git *linux.GitHeld
	cl  *linux.CacheLayers
	pol *policy.Policy
}

func newSession(pol *policy.Policy) (sessionImpl, error) {
	if pol.Mode() == policy.DangerFullAccess {
		return nil, nil
	}
	if pol.Egress() != nil {
		// An allow-list needs agentbox's proxy, served for each run on
		// listeners the run's init stage hands over: each command of
		// the session starts as a lone run, with its own proxy and
		// report.
		return nil, nil
	}
	ph, spec, git, err := prepareLinux(pol)
	if err != nil {
		return nil, err
	}
	cl, err := applyCaches(pol, spec, true)
	if err != nil {
		git.Release()
		ph.Release()
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	z, err := linux.StartSession(spec)
	if err != nil {
		cl.Release()
		git.Release()
		ph.Release()
		var nu *linux.NoUsernsError
		if errors.As(err, &nu) {
			// Degraded mode: each command starts (or is refused) on
			// its own, exactly as a lone run.
			return nil, nil
		}
		return nil, startError(err)
	}
	return &linuxSession{z: z, ph: ph, git: git, cl: cl, pol: pol}, nil
}

func (l *linuxSession) start(c *Cmd) (process, error) {
	// Each command's git writes are checked when it ends (a lone run's
	// are when the run does).
	gl := newGitlinkGuard(l.pol)
	p, err := l.z.Start(c.Path, c.Args, c.Env, c.workDir(), c.stdio())
	if err != nil {
		return nil, startError(err)
	}
	return withGitlinkGuard(&sessionProcess{p}, gl, c), nil
}

func (l *linuxSession) done() <-chan struct{} { return l.z.Done() }

func (l *linuxSession) close() error {
	err := l.z.Close()
	l.cl.Release()
	l.git.Release()
	l.ph.Release()
	return err
}

type sessionProcess struct{ p *linux.SessionProcess }

func (s *sessionProcess) Wait() (*Status, error) {
	code, sig, err := s.p.Wait()
	if err != nil {
		return nil, err
	}
	return &Status{Code: code, Signal: sig}, nil
}

func (s *sessionProcess) Signal(sig os.Signal) error { return s.p.Signal(sig) }

// pid: the session's init started the command; agentbox has no process
// of its own for it.
func (s *sessionProcess) pid() int    { return 0 }
func (s *sessionProcess) Kill() error { return s.p.Kill() }
