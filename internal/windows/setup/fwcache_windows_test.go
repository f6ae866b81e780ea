package setup

import "testing"

// The cheap state is readable without administrator rights and stable
// between two reads, so an unchanged firewall skips PowerShell.
func TestFirewallStateStable(t *testing.T) {
	r1, v1, err := firewallState()
	if err != nil {
		if underWine() {
			t.Skipf("Wine has no firewall service to ask: %v", err)
		}
		t.Fatal(err)
	}
	r2, v2, err := firewallState()
	if err != nil {
		t.Fatal(err)
	}
	if FirewallFingerprint(r1, v1) != FirewallFingerprint(r2, v2) {
		t.Error("fingerprint changed between two reads of an unchanged firewall")
	}
	if !underWine() && !r1 {
		t.Error("the firewall service does not run on this host: elevated runs with the network off would refuse")
	}
}
