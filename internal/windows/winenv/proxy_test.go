package winenv

import (
	"strings"
	"testing"
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
