package setup

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// Checking the firewall's active policy takes a PowerShell run (1-3 s,
// and blocked where AppLocker or WDAC forbid PowerShell), too slow and too
// fragile for every offline command. So elevated runs check it once and
// cache the result, keyed by a fingerprint of everything that decides it
// and that can be read in a millisecond: the firewall service's state
// and the registry values the local store, group policy and MDM keep the
// profile settings in, plus agentbox's own rules. Any change to them, or
// a cached check older than FirewallCacheMaxAge, means a fresh PowerShell
// check; a stopped firewall service fails at once.

// FirewallCacheMaxAge bounds how long a verified state is trusted even
// when nothing it depends on changed.
const FirewallCacheMaxAge = 12 * time.Hour

// FirewallCache is the cached verification (firewall.json in the
// per-user state directory, which no sandboxed command can write).
type FirewallCache struct {
	Version     int       `json:"version"`
	Fingerprint string    `json:"fingerprint"`
	VerifiedAt  time.Time `json:"verified_at"`
}

const firewallCacheVersion = 1

// RegValue is one registry value the fingerprint covers.
type RegValue struct {
	Key, Name string
	Data      string // a rendering of the value's type and data
}

// FirewallFingerprint hashes the service state and values: the same set
// in any order gives the same fingerprint, and any difference in a key,
// name or data another.
func FirewallFingerprint(serviceRunning bool, vals []RegValue) string {
	lines := make([]string, 0, len(vals)+1)
	lines = append(lines, "service running="+map[bool]string{true: "yes", false: "no"}[serviceRunning])
	for _, v := range vals {
		lines = append(lines, strings.ToUpper(v.Key)+"\x00"+strings.ToUpper(v.Name)+"\x00"+v.Data)
	}
	slices.Sort(lines[1:])
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:])
}

// Fresh reports whether the cache vouches for fingerprint fp at now.
func (c *FirewallCache) Fresh(fp string, now time.Time) bool {
	return c != nil && c.Version == firewallCacheVersion && c.Fingerprint == fp &&
		!c.VerifiedAt.After(now) && now.Sub(c.VerifiedAt) < FirewallCacheMaxAge
}

// firewallRegistryKeys are where the profile settings live (HKLM): the
// local store, group policy, and MDM (the Firewall CSP).
var firewallRegistryKeys = []string{
	`SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\DomainProfile`,
	`SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\StandardProfile`,
	`SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\PublicProfile`,
	`SOFTWARE\Policies\Microsoft\WindowsFirewall\DomainProfile`,
	`SOFTWARE\Policies\Microsoft\WindowsFirewall\PrivateProfile`,
	`SOFTWARE\Policies\Microsoft\WindowsFirewall\PublicProfile`,
	`SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\Mdm\DomainProfile`,
	`SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\Mdm\PrivateProfile`,
	`SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\Mdm\PublicProfile`,
}

// firewallRulesKey holds the local store's rules, one value per rule;
// the fingerprint covers the ones that name agentbox's rules.
const firewallRulesKey = `SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy\FirewallRules`

// isAgentboxRule reports whether a rule value's data is one of agentbox's
// rules ("...|Name=agentbox-sandbox-...|...").
func isAgentboxRule(data string) bool {
	return strings.Contains(strings.ToLower(data), "name="+strings.ToLower(RulePrefix))
}
