package setup

import (
	"testing"
	"time"
)

func TestFirewallFingerprint(t *testing.T) {
	a := []RegValue{{Key: `K\DomainProfile`, Name: "EnableFirewall", Data: "dword:1"}, {Key: `K\PublicProfile`, Name: "EnableFirewall", Data: "dword:1"}}
	b := []RegValue{a[1], a[0]}
	if FirewallFingerprint(true, a) != FirewallFingerprint(true, b) {
		t.Error("order changes the fingerprint")
	}
	off := []RegValue{a[0], {Key: `K\PublicProfile`, Name: "EnableFirewall", Data: "dword:0"}}
	for name, fp := range map[string]string{
		"a profile turned off": FirewallFingerprint(true, off),
		"service stopped":      FirewallFingerprint(false, a),
		"a value added":        FirewallFingerprint(true, append(a, RegValue{Key: `K\Gp`, Name: "AllowLocalPolicyMerge", Data: "dword:0"})),
	} {
		if fp == FirewallFingerprint(true, a) {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

// A cached verification is used only for the same fingerprint, not in
// the future, and not past its age: otherwise a fresh PowerShell check.
func TestFirewallCacheFresh(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	c := &FirewallCache{Version: firewallCacheVersion, Fingerprint: "fp", VerifiedAt: now.Add(-time.Hour)}
	if !c.Fresh("fp", now) {
		t.Error("recent matching check not used")
	}
	for name, fresh := range map[string]bool{
		"other fingerprint": c.Fresh("other", now),
		"too old":           c.Fresh("fp", now.Add(FirewallCacheMaxAge)),
		"from the future":   c.Fresh("fp", now.Add(-2*time.Hour)),
		"nil cache":         (*FirewallCache)(nil).Fresh("fp", now),
		"other version":     (&FirewallCache{Version: 9, Fingerprint: "fp", VerifiedAt: now}).Fresh("fp", now),
	} {
		if fresh {
			t.Errorf("%s: cache trusted", name)
		}
	}
}

func TestIsAgentboxRule(t *testing.T) {
	if !isAgentboxRule("v2.30|Action=Block|Active=TRUE|Dir=Out|Name=agentbox-sandbox-offline-out|") {
		t.Error("agentbox rule not recognised")
	}
	if isAgentboxRule("v2.30|Action=Allow|Name=Core Networking - DNS (UDP-Out)|") {
		t.Error("another rule taken for agentbox's")
	}
}
