package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// testHostsEnv names a hosts(5)-style file that replaces name resolution
// for the proxy, so tests can give test names addresses without touching
// the machine's /etc/hosts. It only changes what the caller's own proxy
// resolves; the sandboxed command cannot set it.
const testHostsEnv = "AGENTBOX_TEST_HOSTS"

// newEgressProxy returns the proxy for a policy with an allow-list.
func newEgressProxy(pol *policy.Policy) (*netproxy.Server, error) {
	if err := checkEgress(pol); err != nil {
		return nil, err
	}
	cfg := netproxy.Config{Rules: pol.AllowList()}
	if f := os.Getenv(testHostsEnv); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", testHostsEnv, err)
		}
		h, err := netproxy.ParseHosts(b)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", testHostsEnv, f, err)
		}
		cfg.Resolver = h
	}
	return netproxy.New(cfg), nil
}

// checkEgress refuses an allow-list where no backend can enforce it yet.
func checkEgress(pol *policy.Policy) error {
	if pol.AllowList() == nil {
		return nil
	}
	switch {
	case runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "windows":
		return fmt.Errorf("allow-listed egress (Options.AllowDomains, [network] allowed_domains) is not available on %s: %w", runtime.GOOS, ErrUnsupported)
	}
	return nil
}

// hostLoopbackProxy starts the allow-list proxy on two ports of the host's
// loopback, for platforms and modes without a network namespace of the
// sandbox's own: the HTTP proxy's listener, then the SOCKS5 proxy's.
func hostLoopbackProxy(pol *policy.Policy) (*netproxy.Server, []net.Listener, error) {
	srv, err := newEgressProxy(pol)
	if err != nil {
		return nil, nil, err
	}
	var lns []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, nil, fmt.Errorf("allow-list proxy: %w", err)
		}
		lns = append(lns, ln)
	}
	go srv.ServeHTTPProxy(lns[0])
	go srv.ServeSOCKS(lns[1])
	return srv, lns, nil
}
