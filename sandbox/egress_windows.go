package sandbox

import (
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

// windowsEgress starts the allow-list proxy on the host's loopback for an
// unelevated run with an allow-list, and returns the proxy variables that
// point at it. The block is advisory there, and the run says so.
func windowsEgress(pol *policy.Policy, env []string) (*netproxy.Server, []string, error) {
	if pol.AllowList() == nil || pol.Mode() == policy.DangerFullAccess {
		return nil, nil, nil
	}
	srv, lns, err := hostLoopbackProxy(pol)
	if err != nil {
		return nil, nil, err
	}
	java, _ := winenv.Get(env, "JAVA_TOOL_OPTIONS")
	return srv, netproxy.Env(lns[0].Addr().String(), lns[1].Addr().String(), java), nil
}
