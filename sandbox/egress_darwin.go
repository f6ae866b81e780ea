package sandbox

import (
	"net"
	"os"

	"github.com/agentbox/agentbox/internal/darwin"
	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// darwinEgress starts the allow-list proxy on two ports of the host's
// loopback (macOS has no network namespace to put them in) and returns
// the profile input allowing only those two ports and the command's
// environment pointing at them.
func darwinEgress(pol *policy.Policy, in darwin.Input, env []string) (*netproxy.Server, darwin.Input, []string, error) {
	srv, lns, err := hostLoopbackProxy(pol)
	if err != nil {
		return nil, in, nil, err
	}
	httpAddr, socksAddr := lns[0].Addr().String(), lns[1].Addr().String()
	in.Network = darwin.NetworkLocalhostPort
	in.ProxyPort = lns[0].Addr().(*net.TCPAddr).Port
	in.SOCKSPort = lns[1].Addr().(*net.TCPAddr).Port
	env = netproxy.MergeEnv(env, netproxy.Env(httpAddr, socksAddr, netproxy.Lookup(env, "JAVA_TOOL_OPTIONS")))
	return srv, in, env, nil
}

// proxiedProcess ends the proxy when the command's run ends.
type proxiedProcess struct {
	process
	proxy *netproxy.Server
}

func (p *proxiedProcess) Wait() (*Status, error) {
	st, err := p.process.Wait()
	p.proxy.Close()
	return st, err
}

func (p *proxiedProcess) Signal(s os.Signal) error { return p.process.Signal(s) }

func (p *proxiedProcess) networkReport() netpolicy.Report { return p.proxy.Recorder().Report() }
