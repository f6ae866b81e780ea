package sandbox

import (
	"errors"
	"os"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/policy"
)

// linuxSession is a session's zygote and the placeholders it holds for
// the session's whole life.
type linuxSession struct {
	z  *linux.Session
	ph *linux.Placeholders
}

func newSession(pol *policy.Policy) (sessionImpl, error) {
	if pol.Mode == policy.DangerFullAccess {
		return nil, nil
	}
	if pol.Egress != nil {
		// An allow-list needs agentbox's proxy, served for each run on
		// listeners the run's init stage hands over: each command of
		// the session starts as a lone run, with its own proxy and
		// report.
		return nil, nil
	}
	state := stateDir()
	if state != "" {
		linux.SweepPlaceholders(state)
	}
	ph, err := linux.AcquirePlaceholders(linux.HeldDirs(pol), state)
	if err != nil {
		return nil, &StartError{CodeSandboxFailure, err}
	}
	z, err := linux.StartSession(linuxSpec(pol, ph))
	if err != nil {
		ph.Release()
		var nu *linux.NoUsernsError
		if errors.As(err, &nu) {
			// Degraded mode: each command starts (or is refused) on
			// its own, exactly as a lone run.
			return nil, nil
		}
		var se *linux.StartError
		if errors.As(err, &se) {
			return nil, &StartError{se.Code, errors.New(se.Msg)}
		}
		return nil, &StartError{CodeSandboxFailure, err}
	}
	return &linuxSession{z: z, ph: ph}, nil
}

func (l *linuxSession) start(c *Cmd) (process, error) {
	p, err := l.z.Start(c.Path, c.Args, c.Env, c.stdio())
	if err != nil {
		var se *linux.StartError
		if errors.As(err, &se) {
			return nil, &StartError{se.Code, errors.New(se.Msg)}
		}
		return nil, &StartError{CodeSandboxFailure, err}
	}
	return &sessionProcess{p}, nil
}

func (l *linuxSession) close() error {
	err := l.z.Close()
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
func (s *sessionProcess) Kill() error                { return s.p.Kill() }
