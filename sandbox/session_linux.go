package sandbox

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/nameserver"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// linuxSession is a session's zygote and what it holds for the session's
// whole life: the tool caches' copy-on-write layers (one layer for all the
// session's commands) and, with an allow-list or the network off, the
// proxy (and with the network off the name server). Placeholders it
// makes for each command, which the command's end removes (see
// linux.Session.Start): one left on the host between commands would keep
// the user from creating the name there, and one removed on the host is
// unbound in the session too.
type linuxSession struct {
	z     *linux.Session
	cl    *linux.CacheLayers
	td    *linux.TempDirs
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
	running map[uint32]*netproxy.Recorder // by linux.SessionProcess.ID
	// ports carries the session's published ports and host ports (nil
	// without them) for its whole life; active are its running
	// commands, to one of which a connection is counted (see
	// portCounters).
	ports  *portRelay
	active map[*sessionCommand]bool

	state string
	held  []linux.HeldDir // the policy's, as a lone run holds them
	git   gitHolds
	pool  *linux.Pool // the placeholders between commands, off the host
	// writable are the held paths the sandbox keeps writable (a .git
	// opened by allow_git_writes, pinned): not bound read-only.
	writable map[string]bool
}

func newSession(pol *policy.Policy, init string) (sessionImpl, error) {
	if pol.Mode() == policy.DangerFullAccess {
		return nil, nil
	}
	// Built as a lone run's sandbox, with its placeholders held while
	// the zygote builds the root (which binds them), then let go of into
	// the session's pool: the first command takes them back bound.
	state := stateDir()
	var pool *linux.Pool
	if pol.Mode() == policy.WorkspaceWrite {
		pool = linux.NewPool(state)
	}
	// undo releases what the session would hold for its life, if it
	// does not start; built, the policy's placeholders, once the
	// zygote has built the root.
	var undo, built cleanupStack
	undo.add(pool.Close)
	fail := func(err error) (sessionImpl, error) {
		built.run()
		undo.run()
		return nil, err
	}
	sp, td, gh, err := prepareLinux(pol, pool, &built, &undo)
	if err != nil {
		return fail(err)
	}
	held := linux.HeldDirs(pol)
	// The published ports' listeners on the host, before the sandbox:
	// a port in use fails the session at once.
	relay, err := listenPublished(pol)
	if err != nil {
		return fail(err)
	}
	undo.add(relay.Close)
	cl, err := applyCaches(pol, sp, true)
	if err != nil {
		return fail(&StartError{Code: CodeSandboxFailure, Err: err})
	}
	undo.add(cl.Release)
	sp.Session.Init = init
	// The mounter also masks what a hiding rule matches that was not
	// there when the session began (or was replaced on the host since,
	// which took its mask away).
	sp.Session.BindPerCommand = len(held) > 0 || len(gh.dirs) > 0 || len(gh.files) > 0 || len(pol.HideRules()) > 0
	z, err := linux.StartSession(sp)
	built.run()
	if err != nil {
		undo.run()
		var nu *linux.NoUsernsError
		if errors.As(err, &nu) {
			// Degraded mode: each command starts (or is refused) on
			// its own, exactly as a lone run, an allow-list's proxy
			// on the host's loopback and the connect supervisor
			// included. Published ports and host ports are refused
			// now rather than at each command.
			if err := refuseDegradedPorts(pol); err != nil {
				return nil, &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("%w (%v)", err, nu)}
			}
			return nil, nil
		}
		return nil, startError(err)
	}
	l := &linuxSession{z: z, cl: cl, td: td, pol: pol, state: state, held: held, git: gh, writable: map[string]bool{}, pool: pool,
		running: map[uint32]*netproxy.Recorder{}, active: map[*sessionCommand]bool{}}
	for _, m := range sp.FS.Mounts {
		l.writable[m.Path] = m.Kind == spec.Pin || m.Kind == spec.BindWritable
	}
	// The published ports and host ports, for the session's life.
	l.ports = relay
	if err := relay.serve(z.Ports(), l.portCounters); err != nil {
		l.close()
		return nil, &StartError{Code: CodeSandboxFailure, Err: err}
	}
	switch {
	case sp.Net.Proxy && sp.Net.ProxyOff:
		// The session's refusing proxy, on its own two listeners: a
		// command costs it nothing, and its requests are recorded for
		// the command whose socket made them.
		lns := z.ProxyListeners()
		if len(lns) != 2 {
			l.close()
			return nil, &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("the session's sandbox handed over %d proxy listeners, want 2", len(lns))}
		}
		l.off = true
		l.proxy = netproxy.New(netproxy.Config{Rules: policy.NetworkOffList(), RecorderFor: func(a net.Addr) *netproxy.Recorder {
			if t, ok := a.(*net.TCPAddr); ok {
				return l.recorder("tcp", uint16(t.Port))
			}
			return nil
		}})
		go l.proxy.ServeHTTPProxy(lns[0])
		go l.proxy.ServeSOCKS(lns[1])
	case sp.Net.Proxy:
		// One proxy for the session's whole life, serving each
		// command on listeners of its own (see start).
		if l.proxy, err = newProxy(pol); err != nil {
			l.close()
			return nil, &StartError{Code: CodeSandboxFailure, Err: err}
		}
	}
	l.dns = serveResolver(z.Resolver(), sp, pol, l.proxy, l.recorder)
	return l, nil
}

// portCounters is where the session's published ports and host ports
// count a connection: in the report of the one command running, if only
// one is; a connection while none or several run is carried but
// counted nowhere (a listener's connections cannot be told apart by
// command).
func (l *linuxSession) portCounters() (*netproxy.Recorder, *publishCounter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.active) != 1 {
		return nil, nil
	}
	for sp := range l.active {
		return sp.rec, sp.published
	}
	return nil, nil
}

// recorder is where the session's name server and refusing proxy record
// what came from port: in the recorder of the command whose socket
// connected to them from there (glibc's, Go's and c-ares's resolvers
// connect their sockets, as every TCP client does), or, for a socket that
// sent without connecting (musl's resolver), of the one command running
// if only one is; while several run, such a look-up is answered but
// recorded nowhere.
func (l *linuxSession) recorder(network string, port uint16) *netproxy.Recorder {
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

func (l *linuxSession) start(c *Cmd, p *proc) error {
	// What a lone run would hold, held for this command alone; released
	// once it has ended, with everything it started (its pid namespace
	// is gone when the wait returns), so that nothing is left on the
	// host.
	ph, err := linux.AcquirePooled(l.held, l.state, l.pool)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	p.cleanup.add(ph.Release)
	git, err := l.git.hold(l.state, l.pool)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	p.cleanup.add(git.Release)
	var bind []linux.HeldPath
	for _, h := range append(ph.Held(), git.Held()...) {
		if !l.writable[h.Path] {
			bind = append(bind, h)
		}
	}
	sc := &sessionCommand{session: l}
	var onID func(uint32)
	if l.proxy != nil && !l.off {
		// The command's part of the session's allow-list proxy, made
		// before it starts: its look-ups and transparent connections
		// (by its sockets' ports, as with the network off) and its
		// proxy requests go to its recorder. Once its tree is gone,
		// closing the scope closes its listeners and ends its
		// tunnels; once Close returns, its report is complete.
		sc.scope = l.proxy.NewScope()
		p.cleanup.addErr(sc.scope.Close)
	}
	if l.off || sc.scope != nil {
		// Known by its id before it starts: what it asks at once is
		// its own. With the network off, rec is the command's
		// recorder, which the session's name server and refusing
		// proxy find by id among the session's running commands.
		sc.rec = netproxy.NewRecorder()
		if sc.scope != nil {
			sc.rec = sc.scope.Recorder()
		}
		onID = func(id uint32) {
			l.mu.Lock()
			sc.id = id
			l.running[id] = sc.rec
			l.mu.Unlock()
		}
	}
	// Out of the session's running commands once it has ended: every
	// answer it got was recorded before it was sent.
	p.cleanup.add(sc.forget)
	// The hiding rules again, for what exists now: the zygote masks
	// what is not masked yet.
	hidden, err := l.pol.HiddenNow()
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	hides, _ := linux.HidePlan(hidden, l.pol.WritableRoots())
	sp, err := l.z.Start(c.Path, c.Args, l.td.Env(l.pol, c.Env, true), c.workDir(), c.stdio(), bind, hides, onID)
	if err != nil {
		return startError(err)
	}
	p.wait = statusOf(sp.Wait)
	// pid: the session's init started the command; agentbox has no
	// process of its own for it.
	p.signal, p.kill, p.pid = sp.Signal, sp.Kill, 0
	p.addReport(func(s *sections) {
		if sc.rec != nil {
			recordUnreachable(sc.rec, sp.Unreachable())
			s.network = sc.rec.Report()
		}
		s.published = sc.published.report()
		s.files, s.filesUnavailable = sp.Files()
	})
	if sc.scope != nil {
		// The command's own listeners in the session's network
		// namespace, which its proxy variables name, served in a
		// scope of the session's proxy: its report holds its own
		// decisions, whatever the session's other commands do at the
		// same time.
		lns := sp.ProxyListeners()
		if len(lns) != 2 {
			for _, ln := range lns {
				ln.Close()
			}
			sp.Kill()
			p.Wait()
			return startError(fmt.Errorf("the session's sandbox handed over %d proxy listeners for the command, want 2", len(lns)))
		}
		go sc.scope.ServeHTTPProxy(lns[0])
		go sc.scope.ServeSOCKS(lns[1])
	}
	if l.ports != nil {
		sc.published = &publishCounter{}
		l.mu.Lock()
		l.active[sc] = true
		l.mu.Unlock()
	}
	return nil
}

func (l *linuxSession) done() <-chan struct{} { return l.z.Done() }

func (l *linuxSession) close() error {
	// The published ports close on the host with the session.
	l.ports.Close()
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
	l.td.Release()
	// After the zygote: with its mount namespace gone, removing the kept
	// placeholders unbinds nothing.
	l.pool.Close()
	return err
}

// sessionCommand is what the session knows of one of its running
// commands: where its network decisions and published ports'
// connections are counted.
type sessionCommand struct {
	session *linuxSession
	scope   *netproxy.Scope // the command's part of the session's allow-list proxy; nil without one
	rec     *netproxy.Recorder
	id      uint32
	// published counts the session's published ports' connections
	// while the command runs alone (see portCounters).
	published *publishCounter
}

// forget takes the command out of its session's running ones.
func (s *sessionCommand) forget() {
	s.session.mu.Lock()
	if s.rec != nil && s.session.running[s.id] == s.rec {
		delete(s.session.running, s.id)
	}
	delete(s.session.active, s)
	s.session.mu.Unlock()
}
