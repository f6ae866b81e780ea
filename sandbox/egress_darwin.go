package sandbox

import (
	"net"

	"github.com/agentbox/agentbox/internal/darwin"
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
