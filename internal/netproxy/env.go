package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// NoProxy is the NO_PROXY value inside a sandbox: the sandbox's own
// loopback stays direct.
const NoProxy = "localhost,127.0.0.1,::1"

// Env returns the variables that point a command's tools at the proxy:
// httpAddr is the HTTP proxy's host:port, socksAddr the SOCKS5 proxy's
// (empty when there is none). Besides the conventional variables it covers
// tools that read only their own: the JVM (system properties through
// JAVA_TOOL_OPTIONS), npm and yarn, Node's built-in http and fetch (which
// honour the variables only with NODE_USE_ENV_PROXY) and rsync. A tool
// that ignores all of them has no route at all.
func Env(httpAddr, socksAddr string, oldJavaToolOptions string) []string {
	hp := "http://" + httpAddr
	env := []string{
		"http_proxy=" + hp, "https_proxy=" + hp,
		"HTTP_PROXY=" + hp, "HTTPS_PROXY=" + hp,
		"NO_PROXY=" + NoProxy, "no_proxy=" + NoProxy,
		"npm_config_proxy=" + hp, "npm_config_https_proxy=" + hp,
		"npm_config_noproxy=" + NoProxy,
		"YARN_HTTP_PROXY=" + hp, "YARN_HTTPS_PROXY=" + hp,
		"NODE_USE_ENV_PROXY=1",
		"RSYNC_PROXY=" + httpAddr,
	}
	if socksAddr != "" {
		// socks5h: the proxy resolves names (there is no DNS inside).
		sp := "socks5h://" + socksAddr
		env = append(env, "ALL_PROXY="+sp, "all_proxy="+sp)
	}
	h, p, _ := net.SplitHostPort(httpAddr)
	java := fmt.Sprintf("-Dhttp.proxyHost=%s -Dhttp.proxyPort=%s -Dhttps.proxyHost=%s -Dhttps.proxyPort=%s -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]", h, p, h, p)
	if strings.TrimSpace(oldJavaToolOptions) != "" {
		java = oldJavaToolOptions + " " + java
	}
	env = append(env, "JAVA_TOOL_OPTIONS="+java)
	return env
}

// OffEnv returns the variables that point a command's tools at the
// refusing proxy of a sandbox without network (see [policy.NetworkOffList]):
// the conventional ones only, which the tools that honour them read
// unless the user's own configuration names another proxy. No
// tool-specific configuration (npm's, yarn's, the JVM's) is touched:
// the proxy only makes a failure quick and explained, and a tool that
// does not use it fails at once anyway (agentbox's name server knows no
// name). local are names left direct, beside localhost: those the
// sandbox's /etc/hosts gives loopback addresses.
func OffEnv(httpAddr, socksAddr string, local []string) []string {
	hp := "http://" + httpAddr
	// All of loopback stays direct, as it does without a proxy: a
	// server a test starts on 127.0.0.2 must keep working. Tools that
	// read no CIDR in NO_PROXY (curl before 7.86) skip the entry.
	noProxy := NoProxy + ",127.0.0.0/8"
	for _, n := range local {
		if n != "localhost" {
			noProxy += "," + n
		}
	}
	env := []string{
		"http_proxy=" + hp, "https_proxy=" + hp,
		"HTTP_PROXY=" + hp, "HTTPS_PROXY=" + hp,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	}
	if socksAddr != "" {
		sp := "socks5h://" + socksAddr
		env = append(env, "ALL_PROXY="+sp, "all_proxy="+sp)
	}
	return env
}

// MergeEnv returns env with every variable in set replacing any existing
// one of the same name (set wins; order otherwise kept).
func MergeEnv(env, set []string) []string {
	names := map[string]bool{}
	for _, kv := range set {
		n, _, _ := strings.Cut(kv, "=")
		names[n] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		if !names[n] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// Lookup returns the value of name in env.
func Lookup(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}

// HostsResolver resolves names from a fixed table only, as a hosts file
// does; names not in it do not exist. Tests use it to make test names
// resolvable for the proxy without touching the machine's /etc/hosts.
type HostsResolver map[string][]netip.Addr

// LookupNetIP implements [Resolver].
func (h HostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// ParseHosts reads hosts(5) syntax: an address, then names; # comments.
func ParseHosts(data []byte) (HostsResolver, error) {
	h := HostsResolver{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil || len(f) < 2 {
			return nil, fmt.Errorf("line %d: want an address and names", n)
		}
		for _, name := range f[1:] {
			name = strings.ToLower(strings.TrimSuffix(name, "."))
			h[name] = append(h[name], a)
		}
	}
	return h, sc.Err()
}
