package sandbox

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"

	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// RunReport is what a finished command reports besides its exit status:
// the JSON object `agentbox run --report FILE` writes. Sections are named
// so that more can be added.
type RunReport struct {
	ExitCode int            `json:"exit_code"`
	Network  *NetworkReport `json:"network"`
}

// Network modes in [NetworkReport].Mode.
const (
	NetworkOff       = "off"
	NetworkAllowList = "allow-list"
	NetworkOn        = "on"
)

// NetworkReport is the "network" section: with an allow-list, every
// destination the command asked agentbox's proxy for, allowed or refused.
type NetworkReport struct {
	Mode    string           `json:"mode"`
	Allowed []NetworkAllowed `json:"allowed"`
	Denied  []NetworkDenied  `json:"denied"`
}

// NetworkAllowed is a destination the proxy connected to, and how often.
type NetworkAllowed struct {
	Host  string `json:"host"`
	Port  uint16 `json:"port"`
	Count int    `json:"count"`
}

// NetworkDenied is a destination the proxy refused, why, and how often.
type NetworkDenied struct {
	Host   string `json:"host"`
	Port   uint16 `json:"port"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// NewRunReport is the report of a command that ended with exitCode and
// made no network requests through a proxy (or never started).
func NewRunReport(pol *policy.Policy, exitCode int) *RunReport {
	mode := NetworkOff
	switch {
	case pol != nil && pol.Egress() != nil:
		mode = NetworkAllowList
	case pol != nil && pol.Network():
		mode = NetworkOn
	}
	return &RunReport{ExitCode: exitCode, Network: &NetworkReport{Mode: mode, Allowed: []NetworkAllowed{}, Denied: []NetworkDenied{}}}
}

func (r *RunReport) addNetwork(rep netpolicy.Report) {
	for _, a := range rep.Allowed {
		r.Network.Allowed = append(r.Network.Allowed, NetworkAllowed(a))
	}
	for _, d := range rep.Denied {
		r.Network.Denied = append(r.Network.Denied, NetworkDenied(d))
	}
}

// WriteRefusals prints one line per refused destination, the summary the
// CLI shows at the end of a run.
func (r *RunReport) WriteRefusals(w io.Writer) {
	if r == nil || r.Network == nil {
		return
	}
	for _, d := range r.Network.Denied {
		times := ""
		if d.Count > 1 {
			times = fmt.Sprintf(", %d times", d.Count)
		}
		fmt.Fprintf(w, "agentbox: network: refused %s (%s%s)\n", net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port))), d.Reason, times)
	}
}

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
	cfg := netproxy.Config{Rules: pol.Egress()}
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

// networkReporter is implemented by backends that ran a proxy.
type networkReporter interface {
	networkReport() netpolicy.Report
}

// checkEgress refuses an allow-list where no backend can enforce it yet.
func checkEgress(pol *policy.Policy) error {
	if pol.Egress() == nil {
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

// proxiedProcess ends the allow-list proxy when the command's run ends
// (backends whose process type knows nothing of the proxy).
type proxiedProcess struct {
	process
	proxy *netproxy.Server
	// after, when set, runs once the proxy is closed: it releases what
	// only the proxy used (Windows elevated mode's ports and job handle).
	after func()
}

func (p *proxiedProcess) Wait() (*Status, error) {
	st, err := p.process.Wait()
	p.proxy.Close()
	if p.after != nil {
		p.after()
	}
	return st, err
}

func (p *proxiedProcess) networkReport() netpolicy.Report { return p.proxy.Recorder().Report() }

func closeProxy(p *netproxy.Server) {
	if p != nil {
		p.Close()
	}
}
