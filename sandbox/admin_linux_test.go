package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// TestEgressCheck: doctor's allow-listed egress line for every outcome of
// its probes: available through the network namespace, degraded only,
// or refused with the reason, and whether the policy uses it.
func TestEgressCheck(t *testing.T) {
	off := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite})
	allow := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Egress: &policy.AllowList{}})
	full := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Network: true})
	boom := errors.New("boom")
	cases := []struct {
		pol   *policy.Policy
		way   egressWay
		probe error
		ok    bool
		want  []string
		// transparent: the probe's sandbox had transparent networking.
		transparent bool
	}{
		{allow, egressNetns, nil, true, []string{"available", "network namespace", "names resolve inside"}, true},
		{allow, egressNetns, nil, true, []string{"available", "no transparent networking", "nftables"}, false},
		{off, egressNetns, nil, true, []string{"available", "not used by this policy (no allow-list"}, true},
		{full, egressNetns, nil, true, []string{"available", "opens the whole network"}, true},
		{allow, egressNetns, boom, false, []string{"refused", "boom"}, false},
		{allow, egressDegraded, nil, true, []string{"degraded only", "Options.AllowDegraded", "connect supervisor", "other local processes"}, false},
		{allow, egressDegraded, boom, false, []string{"refused", "no user namespaces", "boom"}, false},
		{allow, egressNone, nil, false, []string{"refused", "Landlock unusable"}, false},
		{allow, egressBroken, nil, false, []string{"refused", "no sandbox could be built"}, false},
	}
	for i, c := range cases {
		got := egressCheck(c.pol, c.way, c.probe, c.transparent)
		if got.OK != c.ok || got.Name != "allow-listed egress" {
			t.Errorf("case %d: %+v, want ok=%v", i, got, c.ok)
		}
		for _, w := range c.want {
			if !strings.Contains(got.Detail, w) {
				t.Errorf("case %d: %q lacks %q", i, got.Detail, w)
			}
		}
	}
	rules, err := policy.ParseAllowList([]string{"good.test", "10.0.0.0/8", "1.1.1.1", "::1"}, []string{"bad.test"}, true)
	if err != nil {
		t.Fatal(err)
	}
	got := allowListCheck(policytest.New(policytest.Fields{Egress: rules})).Detail
	for _, w := range []string{"4 allowed and 1 denied", `"10.0.0.0/8", "::1"`, "allow_local_binding = true"} {
		if !strings.Contains(got, w) {
			t.Errorf("allow-list check %q lacks %q", got, w)
		}
	}
	if strings.Contains(got, "1.1.1.1") {
		t.Errorf("a public address named as local: %q", got)
	}
}
