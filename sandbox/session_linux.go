package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/nameserver"
	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/netproxy"
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
	pol   *policy.Policy
	proxy *netproxy.Server // nil without an allow-list or the network off
	// dns is the session's name server (with the network off): one for
	// all the commands, each look-up recorded in the scope of the
	// command whose socket asked (see recorder).
	dns *nameserver.Server

	mu      sync.Mutex
	running map[uint32]*netproxy.Scope // by linux.SessionProcess.ID
}

func newSession(pol *policy.Policy, init string) (sessionImpl, error) {
	if pol.Mode() == policy.DangerFullAccess {
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
	spec.Init = init
	z, err := linux.StartSession(spec)
	if err != nil {
		cl.Release()
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
	l := &linuxSession{z: z, ph: ph, git: git, cl: cl, pol: pol, running: map[uint32]*netproxy.Scope{}}
	if spec.Proxy {
		// One proxy for the session's whole life, serving each
		// command on listeners of its own (see start).
		if l.proxy, err = newProxy(pol); err != nil {
			l.close()
			return nil, &StartError{Code: CodeSandboxFailure, Err: err}
		}
	}
	l.dns = serveResolver(z.Resolver(), spec, l.recorder)
	return l, nil
}

// recorder is where the session's name server records a look-up from
// port: in the scope of the command whose socket connected to it from
// there (glibc's, Go's and c-ares's resolvers connect their sockets), or,
// for a socket that sent without connecting (musl's), of the one command
// running if only one is; while several run, such a look-up is answered
// but recorded nowhere.
func (l *linuxSession) recorder(network string, port uint16) *netpolicy.Recorder {
	id := l.z.PortOwner(network, port)
	l.mu.Lock()
	defer l.mu.Unlock()
	if sc := l.running[id]; sc != nil {
		return sc.Recorder()
	}
	if len(l.running) == 1 {
		for _, sc := range l.running {
			return sc.Recorder()
		}
	}
	return nil
}

func (l *linuxSession) start(c *Cmd) (process, error) {
	// Each command's git writes are checked when it ends (a lone run's
	// are when the run does).
	gl := newGitlinkGuard(l.pol)
	p, err := l.z.Start(c.Path, c.Args, c.Env, c.workDir(), c.stdio())
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
		if l.dns != nil {
			sp.session, sp.id = l, p.ID()
			l.mu.Lock()
			l.running[sp.id] = sp.scope
			l.mu.Unlock()
		}
	}
	return withGitlinkGuard(sp, gl, c), nil
}

func (l *linuxSession) done() <-chan struct{} { return l.z.Done() }

func (l *linuxSession) close() error {
	// Before the zygote's end: the name server reads the session's port
	// owners table, which goes with it.
	closeResolver(l.dns)
	err := l.z.Close()
	// The zygote is gone, and with it every command: no scope is left to
	// serve, and closing the proxy ends any still held.
	closeProxy(l.proxy)
	l.cl.Release()
	l.git.Release()
	l.ph.Release()
	return err
}

type sessionProcess struct {
	p     *linux.SessionProcess
	scope *netproxy.Scope // the command's part of the session's proxy; nil without one
	// session and id, with the name server, are where the command's
	// scope is known to it (linuxSession.running).
	session *linuxSession
	id      uint32
}

func (s *sessionProcess) Wait() (*Status, error) {
	code, sig, err := s.p.Wait()
	if s.session != nil {
		// The command's tree is gone, and every answer it got was
		// recorded before it was sent.
		s.session.mu.Lock()
		delete(s.session.running, s.id)
		s.session.mu.Unlock()
	}
	if s.scope != nil {
		// The command's tree is gone: close its listeners and end its
		// tunnels; once Close returns, its report is complete.
		s.scope.Close()
		recordUnreachable(s.scope.Recorder(), s.p.Unreachable())
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
