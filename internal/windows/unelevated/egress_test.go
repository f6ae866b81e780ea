package unelevated

import (
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

// TestChildEnvEgress: with an allow-list and the proxy's variables the
// child is pointed at agentbox's proxy; without them (a caller that did
// not start the proxy) it gets the dead proxy, never the caller's own.
func TestChildEnvEgress(t *testing.T) {
	pol := policytest.New(policytest.Fields{Egress: &policy.AllowList{}})
	env := []string{`PATH=C:\bin`, "HTTPS_PROXY=http://corp:8080"}
	got := ChildEnv(pol, env, `C:\d`, "HTTPS_PROXY=http://127.0.0.1:5000")
	if v, _ := winenv.Get(got, "HTTPS_PROXY"); v != "http://127.0.0.1:5000" {
		t.Errorf("with the proxy: HTTPS_PROXY = %q", v)
	}
	got = ChildEnv(pol, env, `C:\d`)
	if v, _ := winenv.Get(got, "HTTPS_PROXY"); v != winenv.DeadProxy {
		t.Errorf("without the proxy: HTTPS_PROXY = %q, want the dead proxy", v)
	}
}
