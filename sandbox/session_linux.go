package sandbox

import (
	"errors"
	"fmt"
	"os"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/internal/rawpolicy"
	"github.com/agentbox/agentbox/policy"
)

// linuxSession is a session's zygote and what it holds for the session's
// whole life: placeholders, git-writes placeholders, the tool caches'
// copy-on-write layers (one layer for all the session's commands) and,
// with an allow-list, the proxy.
type linuxSession struct {
	z     *linux.Session
	ph    *linux.Placeholders
	git   *linux.GitHeld
	cl    *linux.CacheLayers
	td    *linux.TempDirs
	pol   *policy.Policy
	proxy *netproxy.Server // nil without an allow-list
}

func newSession(pol *policy.Policy, init string) (sessionImpl, error) {
	if pol.Mode() == policy.DangerFullAccess {
		return nil, nil
	}
	ph, spec, git, td, err := prepareLinux(pol)
	if err != nil {
		return nil, err
	}
	cl, err := applyCaches(pol, spec, true)
	if err != nil {
		td.Release()
		git.Release()
		ph.Release()
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	spec.Init = init
	z, err := linux.StartSession(spec)
	if err != nil {
		cl.Release()
		td.Release()
		git.Release()
		ph.Release()
		var nu *linux.NoUsernsError
		if errors.As(err, &nu) {
			// Degraded mode: each command starts (or is refused) on
			// its own, exactly as a lone run, an allow-list's proxy
			// on the host's loopback and the connect supervisor
			// included.
			return nil, nil
		}
		return nil, startError(err)
	}
	l := &linuxSession{z: z, ph: ph, git: git, cl: cl, td: td, pol: pol}
	if rawpolicy.Egress(pol) != nil {
		// One proxy for the session's whole life, serving each
		// command on listeners of its own (see start).
		if l.proxy, err = newEgressProxy(pol); err != nil {
			l.close()
			return nil, &StartError{Code: CodeSandboxFailure, Err: err}
		}
	}
	return l, nil
}

func (l *linuxSession) start(c *Cmd) (process, error) {
	p, err := l.z.Start(c.Path, c.Args, l.td.Env(l.pol, c.Env, true), c.workDir(), c.stdio())
	if err != nil {
		return nil, startError(err)
	}
	sp := &sessionProcess{p: p}
	if l.proxy != nil {
		// The command's own listeners in the session's network
		// namespace, which its proxy variables name, served in a
		// scope of the session's proxy: its report holds its own
		// decisions, whatever the session's other commands do at the
		// same time.
		lns := p.ProxyListeners()
		if len(lns) != 2 {
			for _, ln := range lns {
				ln.Close()
			}
			p.Kill()
			p.Wait()
			return nil, startError(fmt.Errorf("the session's sandbox handed over %d proxy listeners for the command, want 2", len(lns)))
		}
		sp.scope = l.proxy.NewScope()
		go sp.scope.ServeHTTPProxy(lns[0])
		go sp.scope.ServeSOCKS(lns[1])
	}
	return sp, nil
}

func (l *linuxSession) done() <-chan struct{} { return l.z.Done() }

func (l *linuxSession) close() error {
	err := l.z.Close()
	// The zygote is gone, and with it every command: no scope is left to
	// serve, and closing the proxy ends any still held.
	closeProxy(l.proxy)
	l.cl.Release()
	l.td.Release()
	l.git.Release()
	l.ph.Release()
	return err
}

type sessionProcess struct {
	p     *linux.SessionProcess
	scope *netproxy.Scope // the command's part of the session's proxy; nil without an allow-list
}

func (s *sessionProcess) Wait() (*Status, error) {
	code, sig, err := s.p.Wait()
	if s.scope != nil {
		// The command's tree is gone: close its listeners and end its
		// tunnels; once Close returns, its report is complete.
		s.scope.Close()
	}
	if err != nil {
		return nil, err
	}
	return &Status{Code: code, Signal: sig}, nil
}

func (s *sessionProcess) networkReport() netpolicy.Report {
	if s.scope == nil {
		return netpolicy.Report{}
	}
	return s.scope.Recorder().Report()
}

func (s *sessionProcess) Signal(sig os.Signal) error { return s.p.Signal(sig) }

// pid: the session's init started the command; agentbox has no process
// of its own for it.
func (s *sessionProcess) pid() int    { return 0 }
func (s *sessionProcess) Kill() error { return s.p.Kill() }
