package winenv

import "strings"

// offlineOnly are the Offline variables that would stop package managers
// from using an allowed registry through the proxy.
var offlineOnly = []string{
	"GIT_ALLOW_PROTOCOL", "PIP_NO_INDEX", "NPM_CONFIG_OFFLINE",
	"YARN_ENABLE_OFFLINE_MODE", "CARGO_NET_OFFLINE", "GOPROXY",
}

// AllowListed rewrites env for an allow-listed run: the advisory block of
// [NoNetwork] (ssh and scp stubs, git's ssh transport failing), but with
// the proxy variables set to proxyEnv (agentbox's allow-list proxy, as
// KEY=VALUE) and the package managers' offline switches left as the
// caller had them. It is advice, like NoNetwork: a program that ignores
// the proxy variables reaches the network directly.
func AllowListed(env []string, denybin string, proxyEnv []string) []string {
	env = NoNetwork(env, denybin)
	for _, k := range offlineOnly {
		env = Unset(env, k)
	}
	return Set(withProxy(env, proxyEnv), "AGENTBOX_NETWORK", "advisory-allow-list")
}

// ProxyEnforced rewrites env for an allow-listed run in elevated mode,
// where the firewall lets the sandbox user reach only agentbox's proxy
// ports on 127.0.0.1: the proxy variables set to proxyEnv, git's too,
// and nothing advisory (no stubs, no dead proxy: the caller's variables
// are otherwise kept, as with the network off there).
func ProxyEnforced(env []string, proxyEnv []string) []string {
	return Set(withProxy(env, proxyEnv), "AGENTBOX_NETWORK", "allow-list")
}

// withProxy sets proxyEnv (KEY=VALUE, replacing any spelling of KEY) and
// points git's own proxy variables at the HTTP proxy.
func withProxy(env []string, proxyEnv []string) []string {
	for _, kv := range proxyEnv {
		k, v, ok := cutEnv(kv)
		if ok {
			env = Set(env, k, v)
		}
	}
	if v, ok := Get(env, "HTTP_PROXY"); ok {
		env = Set(env, "GIT_HTTP_PROXY", v)
		env = Set(env, "GIT_HTTPS_PROXY", v)
	}
	return env
}

// Unset returns env without key, in any spelling.
func Unset(env []string, key string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, ok := cutEnv(kv); !ok || !strings.EqualFold(k, key) {
			out = append(out, kv)
		}
	}
	return out
}
