package sandbox

import (
	"errors"
	"fmt"
	"net"
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
// with an allow-list or the network off, the proxy.
type linuxSession struct {
	z     *linux.Session
	ph    *linux.Placeholders
	git   *linux.GitHeld
	cl    *linux.CacheLayers
	pol   *policy.Policy
	proxy *netproxy.Server // nil without an allow-list or the network off
	// off: the network is off, and the proxy is the session's refusing
	// one, served on the session's own two listeners.
	off bool
	// dns is the session's name server (with the network off). It and
	// the refusing proxy are one for all the commands, each look-up and
	// request recorded for the command whose socket asked (see
	// recorder).
	dns *nameserver.Server

	mu      sync.Mutex
	running map[uint32]*netpolicy.Recorder // by linux.SessionProcess.ID
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
	l := &linuxSession{z: z, ph: ph, git: git, cl: cl, pol: pol, running: map[uint32]*netpolicy.Recorder{}}
	switch {
	case spec.Proxy && spec.ProxyOff:
		// The session's refusing proxy, on its own two listeners: a
		// command costs it nothing, and its requests are recorded for
		// the command whose socket made them.
		lns := z.ProxyListeners()
		if len(lns) != 2 {
			l.close()
			return nil, &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("the session's sandbox handed over %d proxy listeners, want 2", len(lns))}
		}
		l.off = true
		l.proxy = netproxy.New(netproxy.Config{Rules: &netpolicy.Rules{Off: true}, RecorderFor: func(a net.Addr) *netpolicy.Recorder {
			if t, ok := a.(*net.TCPAddr); ok {
				return l.recorder("tcp", uint16(t.Port))
			}
			return nil
		}})
		go l.proxy.ServeHTTPProxy(lns[0])
		go l.proxy.ServeSOCKS(lns[1])
	case spec.Proxy:
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

// recorder is where the session's name server and refusing proxy record
// what came from port: in the recorder of the command whose socket
// connected to them from there (glibc's, Go's and c-ares's resolvers
// connect their sockets, as every TCP client does), or, for a socket that
// sent without connecting (musl's resolver), of the one command running
// if only one is; while several run, such a look-up is answered but
// recorded nowhere.
func (l *linuxSession) recorder(network string, port uint16) *netpolicy.Recorder {
	id := l.z.PortOwner(network, port)
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.running[id]; r != nil {
		return r
	}
	if len(l.running) == 1 {
		for _, r := range l.running {
			return r
		}
	}
	return nil
}

func (l *linuxSession) start(c *Cmd) (process, error) {
	// Each command's git writes are checked when it ends (a lone run's
	// are when the run does).
	gl := newGitlinkGuard(l.pol)
	sp := &sessionProcess{}
	var onID func(uint32)
	if l.off {
		// Known by its id before it starts: what it asks at once is
		// its own.
		sp.session, sp.rec = l, netpolicy.NewRecorder()
		onID = func(id uint32) {
			sp.id = id
			l.mu.Lock()
			l.running[id] = sp.rec
			l.mu.Unlock()
		}
	}
	p, err := l.z.Start(c.Path, c.Args, c.Env, c.workDir(), c.stdio(), onID)
	if err != nil {
		sp.forget()
		return nil, startError(err)
	}
	sp.p = p
	if l.proxy != nil && !l.off {
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
	return withGitlinkGuard(sp, gl, c), nil
}

func (l *linuxSession) done() <-chan struct{} { return l.z.Done() }

func (l *linuxSession) close() error {
	// Before the zygote's end: the name server and the refusing proxy
	// read the session's port owners table, which goes with it.
	closeResolver(l.dns)
	if l.off {
		closeProxy(l.proxy)
	}
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
	scope *netproxy.Scope // the command's part of the session's allow-list proxy; nil without one
	// With the network off, rec is the command's recorder, which the
	// session's name server and refusing proxy find by id in session's
	// running commands.
	rec     *netpolicy.Recorder
	session *linuxSession
	id      uint32
}

// forget takes the command out of its session's running ones.
func (s *sessionProcess) forget() {
	if s.session == nil {
		return
	}
	s.session.mu.Lock()
	if s.session.running[s.id] == s.rec {
		delete(s.session.running, s.id)
	}
	s.session.mu.Unlock()
}

func (s *sessionProcess) Wait() (*Status, error) {
	code, sig, err := s.p.Wait()
	// The command's tree is gone, and every answer it got was recorded
	// before it was sent.
	s.forget()
	if s.rec != nil {
		recordUnreachable(s.rec, s.p.Unreachable())
	}
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
	switch {
	case s.rec != nil:
		return s.rec.Report()
	case s.scope != nil:
		return s.scope.Recorder().Report()
	}
	return netpolicy.Report{}
}

func (s *sessionProcess) Signal(sig os.Signal) error { return s.p.Signal(sig) }

// pid: the session's init started the command; agentbox has no process
// of its own for it.
func (s *sessionProcess) pid() int    { return 0 }
func (s *sessionProcess) Kill() error { return s.p.Kill() }
