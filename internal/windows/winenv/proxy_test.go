package winenv

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/netproxy"
)

func TestAllowListed(t *testing.T) {
	env := []string{`PATH=C:\bin`, "https_proxy=http://corp:8080", "GOPROXY=https://proxy.golang.org", "Path2=x"}
	proxy := []string{"http_proxy=http://127.0.0.1:5000", "HTTPS_PROXY=http://127.0.0.1:5000", "ALL_PROXY=socks5h://127.0.0.1:5001",
		"npm_config_proxy=http://127.0.0.1:5000", "NO_PROXY=localhost,127.0.0.1,::1"}
	got := AllowListed(env, `C:\state\denybin`, proxy)
	want := map[string]string{
		"HTTPS_PROXY":      "http://127.0.0.1:5000",
		"HTTP_PROXY":       "http://127.0.0.1:5000",
		"ALL_PROXY":        "socks5h://127.0.0.1:5001",
		"GIT_HTTP_PROXY":   "http://127.0.0.1:5000",
		"GIT_HTTPS_PROXY":  "http://127.0.0.1:5000",
		"npm_config_proxy": "http://127.0.0.1:5000",
		"GIT_SSH_COMMAND":  "cmd.exe /d /c exit 1",
		"AGENTBOX_NETWORK": "advisory-allow-list",
		"PATH":             `C:\state\denybin;C:\bin`,
		"GOPROXY":          "",
	}
	for k, v := range want {
		if g, _ := Get(got, k); g != v {
			t.Errorf("%s = %q, want %q", k, g, v)
		}
	}
	for _, k := range []string{"PIP_NO_INDEX", "NPM_CONFIG_OFFLINE", "CARGO_NET_OFFLINE", "GIT_ALLOW_PROTOCOL", "GOPROXY"} {
		if _, ok := Get(got, k); ok {
			t.Errorf("%s is set: offline switches must not stop allowed registries", k)
		}
	}
	// One spelling per name: Windows names are case-insensitive, and a
	// leftover "https_proxy=http://corp:8080" would win in some tools.
	n := 0
	for _, kv := range got {
		if strings.HasPrefix(strings.ToUpper(kv), "HTTPS_PROXY=") {
			n++
		}
		if strings.Contains(kv, "corp:8080") || strings.Contains(kv, DeadProxy) {
			t.Errorf("stale proxy left: %q", kv)
		}
	}
	if n != 1 {
		t.Errorf("HTTPS_PROXY appears %d times", n)
	}
}

// TestProxyEnforced is the env plan of an elevated allow-listed run: every
// proxy variable names 127.0.0.1 on the run's two ports (the one address
// the firewall leaves open, on ports inside its range), git's too; no
// advisory stubs; the caller's other variables kept.
func TestProxyEnforced(t *testing.T) {
	env := []string{`PATH=C:\bin`, "https_proxy=http://corp:8080", "GOPROXY=https://proxy.golang.org", "JAVA_TOOL_OPTIONS=-Xmx1g"}
	proxy := netproxy.Env("127.0.0.1:41634", "127.0.0.1:41635", "-Xmx1g")
	got := ProxyEnforced(env, proxy)
	want := map[string]string{
		"HTTP_PROXY":       "http://127.0.0.1:41634",
		"HTTPS_PROXY":      "http://127.0.0.1:41634",
		"ALL_PROXY":        "socks5h://127.0.0.1:41635",
		"GIT_HTTP_PROXY":   "http://127.0.0.1:41634",
		"GIT_HTTPS_PROXY":  "http://127.0.0.1:41634",
		"NO_PROXY":         netproxy.NoProxy,
		"AGENTBOX_NETWORK": "allow-list",
		"PATH":             `C:\bin`,
		"GOPROXY":          "https://proxy.golang.org",
	}
	for k, v := range want {
		if g, _ := Get(got, k); g != v {
			t.Errorf("%s = %q, want %q", k, g, v)
		}
	}
	if j, _ := Get(got, "JAVA_TOOL_OPTIONS"); !strings.HasPrefix(j, "-Xmx1g ") || !strings.Contains(j, "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=41634") {
		t.Errorf("JAVA_TOOL_OPTIONS = %q", j)
	}
	for _, k := range []string{"GIT_SSH_COMMAND", "PIP_NO_INDEX", "NPM_CONFIG_OFFLINE"} {
		if _, ok := Get(got, k); ok {
			t.Errorf("%s set: elevated mode's block is the firewall's, not advice", k)
		}
	}
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		if strings.Contains(kv, "corp:8080") || strings.Contains(kv, DeadProxy) {
			t.Errorf("stale proxy left: %q", kv)
		}
		if strings.Contains(strings.ToLower(k), "proxy") && k != "GOPROXY" && strings.Contains(v, "://") &&
			!strings.Contains(v, "://127.0.0.1:41634") && !strings.Contains(v, "://127.0.0.1:41635") {
			t.Errorf("%s points elsewhere than the run's proxy ports: %q", k, v)
		}
	}
}
