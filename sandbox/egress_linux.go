package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/nameserver"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// With the network off, a sandbox with a network namespace of its own
// gets two servers of agentbox's on its loopback, so that a command that
// tries the network fails at once, and the run can say which host it
// wanted (its report's network.denied, and one line on stderr):
//
//   - a name server (package nameserver), which its own /etc/resolv.conf
//     names, answering every name "no such name";
//   - a proxy that refuses every request, which the conventional proxy
//     variables name. npm, for one, retries a failed look-up or connect
//     twice, 10 and 60 s apart, but gives up at once on the proxy's 403.
//
// Neither opens anything: the namespace still has nothing but loopback.

// networkOff reports whether pol's commands get the servers of a sandbox
// without network (a namespace of their own is checked by the caller).
func networkOff(pol *policy.Policy) bool {
	return pol.Mode() != policy.DangerFullAccess && !pol.Network() && pol.AllowList() == nil
}

// applyNetworkOff asks sp for the name server, the refusing proxy and
// the sandbox's own resolver files when pol's network is off.
func applyNetworkOff(pol *policy.Policy, sp *spec.Spec) {
	if !networkOff(pol) {
		return
	}
	hosts, _ := readSmall("/etc/hosts", 1<<20)
	name, _ := os.Hostname()
	sp.FS.Etc, sp.Net.LocalNames = linux.ResolverFiles(hosts, name)
	sp.Net.Resolver, sp.Net.Proxy, sp.Net.ProxyOff = true, true, true
}

// applyTransparent asks sp for transparent networking when pol has an
// allow-list (see internal/linux's transparent_linux.go): the name
// server answering the list's names with fake addresses, the sandbox's
// own resolver files, and the redirection of its TCP connections to the
// proxy. The proxy variables stay as they are.
func applyTransparent(pol *policy.Policy, sp *spec.Spec) {
	rules := pol.AllowList()
	if pol.Mode() == policy.DangerFullAccess || rules == nil || pol.Network() {
		return
	}
	hosts, _ := readSmall("/etc/hosts", 1<<20)
	name, _ := os.Hostname()
	sp.FS.Etc, sp.Net.LocalNames = linux.AllowListResolverFiles(hosts, name)
	sp.Net.Resolver, sp.Net.Transparent = true, true
	sp.Net.Carried = rules.AllowedPrefixes()
}

// withoutNetworkOff is sp for a sandbox without a network namespace
// (degraded mode), where neither server can be reached: seccomp refuses
// every inet socket, which makes look-ups fail at once, unrecorded.
func withoutNetworkOff(sp *spec.Spec) {
	if sp.Net.ProxyOff {
		sp.Net.Proxy, sp.Net.ProxyOff = false, false
	}
	sp.Net.Resolver, sp.FS.Etc, sp.Net.LocalNames = false, nil, nil
	sp.Net.Transparent, sp.Net.Carried = false, nil
}

// readSmall reads at most max bytes of path.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// newProxy is the proxy a sandbox with a network namespace of its own
// serves on its loopback: the allow-list's, or with the network off one
// that refuses everything.
func newProxy(pol *policy.Policy) (*netproxy.Server, error) {
	if networkOff(pol) {
		return netproxy.New(netproxy.Config{Rules: policy.NetworkOffList()}), nil
	}
	return newEgressProxy(pol)
}

// serveResolver serves the sandbox's name server on r, recording the
// names asked for where recorder says (spec's local names are not
// refusals); nil without r. With transparent networking (r.Transparent,
// and proxy the allow-list's), it answers the allow-list's names with
// fake addresses, and proxy carries the connections made to them.
func serveResolver(r *linux.Resolver, sp *spec.Spec, pol *policy.Policy, proxy *netproxy.Server, recorder func(network string, port uint16) *netproxy.Recorder) *nameserver.Server {
	if r == nil {
		return nil
	}
	cfg := nameserver.Config{Recorder: recorder, Local: sp.Net.LocalNames}
	if r.NoTransparent != "" {
		// The kernel refused the sandbox's packet filter: the proxy
		// variables are the only way out, and names do not resolve
		// inside.
		cfg.Reason = "names do not resolve inside (" + r.NoTransparent + "); tools that use the proxy variables still reach it"
	}
	if sp.Net.Transparent && len(r.Transparent) > 0 && proxy != nil {
		// A second listener: the sandbox carries IPv6 too.
		cfg.Rules, cfg.Fake, cfg.Fake6 = pol.AllowList(), netproxy.NewFakeNames(), len(r.Transparent) > 1
		// Whose connection it is, as whose look-up a query is: by the
		// port of the command's socket.
		t := netproxy.Transparent{Names: cfg.Fake, RecorderFor: func(a net.Addr) *netproxy.Recorder {
			if ta, ok := a.(*net.TCPAddr); ok {
				return recorder("tcp", uint16(ta.Port))
			}
			return nil
		}}
		for _, ln := range r.Transparent {
			go proxy.ServeTransparent(ln, t)
		}
	}
	s := nameserver.New(cfg)
	go s.ServeUDP(r.UDP)
	go s.ServeTCP(r.TCP)
	return s
}

// recordUnreachable adds to rec the destinations the command's connects
// could not reach with the network off.
func recordUnreachable(rec *netproxy.Recorder, us []spec.Unreachable) {
	for _, u := range us {
		reason := u.Reason
		if reason == "" {
			reason = policy.ReasonNetworkOff
		}
		rec.DenyN(u.Addr, u.Port, reason, u.Count)
	}
}

func closeResolver(s *nameserver.Server) {
	if s != nil {
		s.Close()
	}
}

// degradedEgress starts the allow-list proxy on the host's loopback for a
// sandbox without a network namespace, and points sp at it: the
// command's proxy variables, and the only TCP destinations its connect
// supervisor allows.
func degradedEgress(pol *policy.Policy, sp *spec.Spec) (*netproxy.Server, error) {
	if !sp.Walls.MediateUnixConnect {
		return nil, errors.New("allow-listed egress without a network namespace needs connect mediation")
	}
	srv, lns, err := hostLoopbackProxy(pol)
	if err != nil {
		return nil, err
	}
	sp.Net.Proxy = false
	sp.Degraded.ProxyAddrs = []string{lns[0].Addr().String(), lns[1].Addr().String()}
	return srv, nil
}

// serveEgress serves the sandbox's proxy (the allow-list's, or the
// refusing one of a sandbox without network) on the listeners the sandbox
// handed over, for as long as the process runs.
func serveEgress(pol *policy.Policy, p *linux.Process) (*netproxy.Server, error) {
	lns := p.ProxyListeners()
	srv, err := newProxy(pol)
	if err != nil || len(lns) != 2 {
		for _, ln := range lns {
			ln.Close()
		}
		p.Resolver().Close()
		p.Kill()
		p.Wait()
		if err == nil {
			err = fmt.Errorf("the sandbox handed over %d proxy listeners, want 2", len(lns))
		}
		return nil, err
	}
	go srv.ServeHTTPProxy(lns[0])
	go srv.ServeSOCKS(lns[1])
	return srv, nil
}

func closeProxy(p *netproxy.Server) {
	if p != nil {
		p.Close()
	}
}
