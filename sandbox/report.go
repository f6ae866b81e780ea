package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/internal/rawpolicy"
	"github.com/agentbox/agentbox/policy"
)

// RunReport is what a finished command reports besides its exit status,
// set in Cmd.Report by Wait. It marshals to the run report agentbox's CLI
// writes; sections are named so that more can be added.
type RunReport struct {
	ExitCode int            `json:"exit_code"`
	Network  *NetworkReport `json:"network"`
	// Tmp says where the command's private temporary directories are on
	// the host (what it wrote to /tmp or $TMPDIR is there, not in the
	// host's); absent when the policy has none.
	Tmp []TmpDir `json:"tmp,omitempty"`
	// Environment says which of the caller's variables the command did
	// not get.
	Environment *EnvironmentReport `json:"environment"`
}

// EnvironmentReport is the "environment" section: the names (never the
// values) of the caller's variables withheld from the command, by the
// secret-name patterns or [shell_environment_policy].
type EnvironmentReport struct {
	Withheld []string `json:"withheld"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TmpDir is one private temporary directory of the "tmp" section: the
// path the command's programs used (/tmp, $TMPDIR's value) and the
// directory on the host that stood in for it.
type TmpDir struct {
	Path string `json:"path"`
	Host string `json:"host"`
}

// Network modes in [NetworkReport].Mode: no network, only the
// allow-list's destinations through agentbox's proxy, or the network
// without limits.
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

// NetworkDenied is a destination the proxy refused, why, and how often;
// with the network off, also a name the sandbox's name server was asked
// for (Port 0, left out of the JSON), and an address a connect named.
type NetworkDenied struct {
	Host   string `json:"host"`
	Port   uint16 `json:"port,omitempty"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// NewRunReport is the report of a command that ended with exitCode and
// made no network requests through a proxy, or never started, run with
// this process's environment: for a
// caller that writes a report for every command, including those whose
// Start failed (then exitCode is the [StartError]'s Code).
func NewRunReport(pol *policy.Policy, exitCode int) *RunReport {
	mode := NetworkOff
	switch {
	case pol != nil && rawpolicy.Egress(pol) != nil:
		mode = NetworkAllowList
	case pol != nil && pol.Network():
		mode = NetworkOn
	}
	r := &RunReport{ExitCode: exitCode, Network: &NetworkReport{Mode: mode, Allowed: []NetworkAllowed{}, Denied: []NetworkDenied{}}}
	r.Environment = &EnvironmentReport{Withheld: []string{}}
	if pol != nil {
		// What this process's environment loses: the CLI's own runs,
		// through the helper or not, pass it whole to the command.
		_, wh := pol.FilterEnv(os.Environ())
		r.Environment.Withheld = nonNil(wh)
		for _, t := range pol.PrivateTemps() {
			r.Tmp = append(r.Tmp, TmpDir{Path: t.Path, Host: t.Dir})
		}
	}
	return r
}

func (r *RunReport) addNetwork(rep netpolicy.Report) {
	for _, a := range rep.Allowed {
		r.Network.Allowed = append(r.Network.Allowed, NetworkAllowed(a))
	}
	for _, d := range rep.Denied {
		r.Network.Denied = append(r.Network.Denied, NetworkDenied(d))
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
	cfg := netproxy.Config{Rules: rawpolicy.Egress(pol)}
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
	if rawpolicy.Egress(pol) == nil {
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
