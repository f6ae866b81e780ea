package setup

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RulePrefix starts the name of every firewall rule agentbox creates;
// cleanup and drift repair find agentbox's rules (and only those) by it.
const RulePrefix = "agentbox-sandbox-"

// Address sets. Windows firewall takes ranges; loopback is split out so a
// proxy port range can be left open on it alone, and 127.0.0.1 is split
// out of loopback: the proxy listens there only, so the open ports are
// not open on 127.0.0.2 or ::1, where any other program could listen on
// them unseen by agentbox's listener check.
const (
	nonLoopbackV4 = "0.0.0.0-126.255.255.255,128.0.0.0-255.255.255.255"
	nonLoopbackV6 = "::,::2-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	loopback      = "127.0.0.0-127.255.255.255,::1"
	proxyAddr     = "127.0.0.1"
	otherLoopback = "127.0.0.0,127.0.0.2-127.255.255.255,::1"
)

// Rule is one block rule as agentbox wants it and as it reads it
// back. Fields use the values of New-NetFirewallRule / Get-NetFirewallRule.
type Rule struct {
	Name          string `json:"Name"`
	Direction     string `json:"Direction"` // "Outbound" or "Inbound"
	Action        string `json:"Action"`    // "Block"
	Enabled       bool   `json:"Enabled"`
	Profile       string `json:"Profile"`  // "Any": domain, private and public
	Protocol      string `json:"Protocol"` // "Any", "TCP", "UDP"
	RemoteAddress string `json:"RemoteAddress"`
	RemotePort    string `json:"RemotePort"` // "Any" or ranges
	// LocalUser is the LocalUserAuthorizedList SDDL: the rule applies to
	// connections made by these accounts only.
	LocalUser string `json:"LocalUser"`
}

// LocalUserSDDL scopes a rule to one account. CC (SDDL "create child") is
// the right the firewall checks for LocalUserAuthorizedList.
func LocalUserSDDL(sid string) string { return "O:LSD:(A;;CC;;;" + sid + ")" }

// OfflineRules returns the rules that cut the Offline user off the network
// (and an inbound rule: no other machine reaches its listeners).
// With no proxy ports one rule blocks everything. With proxy ports, the
// rule is split so TCP to 127.0.0.1 on those ports stays open and
// everything else is blocked: other addresses, other loopback addresses
// (127.0.0.2 and up, ::1) on every port, other ports of 127.0.0.1, and
// loopback UDP. The firewall cannot tell one run from another, nor
// agentbox's proxy from another program listening on an open port: the
// loopguard package does (a listener check before each run, and the
// proxy's check of every connection's process). The Online user, and
// every other account, matches none of the rules.
func OfflineRules(offlineSID string, proxyPorts []int) []Rule {
	base := Rule{Direction: "Outbound", Action: "Block", Enabled: true, Profile: "Any",
		RemotePort: "Any", LocalUser: LocalUserSDDL(offlineSID)}
	// Inbound: nothing from another machine reaches a listener the
	// Offline user opens (an open port is a way out too). Loopback stays
	// open, so a local dev server started in the sandbox still works.
	inbound := base
	inbound.Name, inbound.Direction, inbound.Protocol = RulePrefix+"offline-block-inbound", "Inbound", "Any"
	inbound.RemoteAddress = nonLoopbackV4 + "," + nonLoopbackV6
	ports := normPorts(proxyPorts)
	if len(ports) == 0 {
		r := base
		r.Name, r.Protocol, r.RemoteAddress = RulePrefix+"offline-block-all", "Any", "Any"
		return []Rule{r, inbound}
	}
	remote, udp, other, tcp := base, base, base, base
	remote.Name, remote.Protocol, remote.RemoteAddress = RulePrefix+"offline-block-remote", "Any", nonLoopbackV4+","+nonLoopbackV6
	udp.Name, udp.Protocol, udp.RemoteAddress = RulePrefix+"offline-block-loopback-udp", "UDP", loopback
	other.Name, other.Protocol, other.RemoteAddress = RulePrefix+"offline-block-loopback-other", "TCP", otherLoopback
	tcp.Name, tcp.Protocol, tcp.RemoteAddress = RulePrefix+"offline-block-loopback-tcp", "TCP", proxyAddr
	tcp.RemotePort = PortComplement(ports)
	return []Rule{remote, udp, other, tcp, inbound}
}

// openNote says which ports the rules leave open, for setup's report.
func openNote(ports []int) string {
	ports = normPorts(ports)
	if len(ports) == 0 {
		return ""
	}
	return fmt.Sprintf(" but TCP to 127.0.0.1 ports %s (agentbox's proxy range)", PortList(ports))
}

// PortList writes sorted, unique ports as the firewall's "a-b,c" ranges.
func PortList(ports []int) string {
	var parts []string
	for i := 0; i < len(ports); {
		j := i
		for j+1 < len(ports) && ports[j+1] == ports[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(ports[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ports[i], ports[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// PortComplement returns the TCP port ranges 1-65535 minus ports, in the
// firewall's "a-b,c,d-e" syntax. ports must be sorted and unique.
func PortComplement(ports []int) string {
	var parts []string
	next := 1
	add := func(lo, hi int) {
		switch {
		case lo > hi:
		case lo == hi:
			parts = append(parts, strconv.Itoa(lo))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", lo, hi))
		}
	}
	for _, p := range ports {
		add(next, p-1)
		next = p + 1
	}
	add(next, 65535)
	return strings.Join(parts, ",")
}

// Drift lists how got differs from want ("" fields of got that Windows
// normalised the same way compare equal). Empty means the rule is right.
func Drift(want, got Rule) []string {
	var d []string
	cmp := func(field, w, g string) {
		if !strings.EqualFold(normList(w), normList(g)) {
			d = append(d, fmt.Sprintf("%s is %q, want %q", field, g, w))
		}
	}
	cmp("Direction", want.Direction, got.Direction)
	cmp("Action", want.Action, got.Action)
	if want.Enabled != got.Enabled {
		d = append(d, fmt.Sprintf("Enabled is %v", got.Enabled))
	}
	cmp("Profile", want.Profile, got.Profile)
	cmp("Protocol", want.Protocol, got.Protocol)
	if !sameAddresses(want.RemoteAddress, got.RemoteAddress) {
		d = append(d, fmt.Sprintf("RemoteAddress is %q, want %q", got.RemoteAddress, want.RemoteAddress))
	}
	cmp("RemotePort", want.RemotePort, got.RemotePort)
	cmp("LocalUser", want.LocalUser, got.LocalUser)
	return d
}

// normList makes "a, b" and "b,a" compare equal: Get-NetFirewall* returns
// lists in its own order and spacing.
func normList(s string) string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	slices.Sort(f)
	return strings.Join(f, ",")
}

// psQuote quotes s as a PowerShell single-quoted string.
func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func psList(s string) string {
	if s == "Any" {
		return "'Any'"
	}
	var q []string
	for _, p := range strings.Split(s, ",") {
		q = append(q, psQuote(strings.TrimSpace(p)))
	}
	return "@(" + strings.Join(q, ",") + ")"
}

// PSCreate is the PowerShell that creates r. Setup uses PowerShell's
// NetSecurity module rather than netsh, which cannot scope a rule to a
// local user, and rather than the firewall COM API through IDispatch,
// whose INetFwRule3 members are not verified to be reachable that way.
func PSCreate(r Rule) string {
	// -RemotePort is only valid with TCP or UDP; "Any" is the default.
	port := ""
	if r.RemotePort != "Any" {
		port = " -RemotePort " + psList(r.RemotePort)
	}
	return fmt.Sprintf("New-NetFirewallRule -Name %s -DisplayName %s -Group 'agentbox' -Description %s "+
		"-Direction %s -Action %s -Enabled %s -Profile %s -Protocol %s -RemoteAddress %s%s -LocalUser %s | Out-Null",
		psQuote(r.Name), psQuote(r.Name), psQuote("agentbox: block outbound network of the sandbox user "+OfflineUser),
		r.Direction, r.Action, map[bool]string{true: "True", false: "False"}[r.Enabled], r.Profile, r.Protocol,
		psList(r.RemoteAddress), port, psQuote(r.LocalUser))
}

// PSQuery is the PowerShell that prints every agentbox rule as a JSON
// array of [Rule] objects, read back to verify and repair them.
const PSQuery = `$ErrorActionPreference='Stop'
$out = @(Get-NetFirewallRule -Name '` + RulePrefix + `*' -ErrorAction SilentlyContinue | ForEach-Object {
  $a = $_ | Get-NetFirewallAddressFilter; $p = $_ | Get-NetFirewallPortFilter; $s = $_ | Get-NetFirewallSecurityFilter
  [pscustomobject]@{Name=$_.Name; Direction="$($_.Direction)"; Action="$($_.Action)"; Enabled=("$($_.Enabled)" -eq 'True');
    Profile="$($_.Profile)"; Protocol="$($p.Protocol)"; RemoteAddress=(@($a.RemoteAddress) -join ',');
    RemotePort=(@($p.RemotePort) -join ','); LocalUser="$($s.LocalUser)"}
})
ConvertTo-Json -InputObject $out -Compress -Depth 3`

// PSRemove is the PowerShell that deletes the named rules.
func PSRemove(names []string) string {
	var q []string
	for _, n := range names {
		q = append(q, psQuote(n))
	}
	return "Remove-NetFirewallRule -Name @(" + strings.Join(q, ",") + ") -ErrorAction SilentlyContinue"
}

// FirewallPlan compares the wanted rules with those read back and returns
// the names to remove (drifted, or agentbox rules no longer wanted) and the
// rules to (re)create.
func FirewallPlan(want, have []Rule) (remove []string, create []Rule, why []string) {
	byName := map[string]Rule{}
	for _, r := range have {
		byName[strings.ToLower(r.Name)] = r
	}
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[strings.ToLower(w.Name)] = true
		g, ok := byName[strings.ToLower(w.Name)]
		if !ok {
			create = append(create, w)
			why = append(why, w.Name+": missing")
			continue
		}
		if d := Drift(w, g); len(d) > 0 {
			remove = append(remove, g.Name)
			create = append(create, w)
			why = append(why, w.Name+": "+strings.Join(d, "; "))
		}
	}
	for _, r := range have {
		if !wanted[strings.ToLower(r.Name)] && strings.HasPrefix(strings.ToLower(r.Name), RulePrefix) {
			remove = append(remove, r.Name)
			why = append(why, r.Name+": no longer wanted")
		}
	}
	return remove, create, why
}

// FirewallProfile is one Windows Firewall profile as the active (merged
// local and group) policy has it; fields are the strings
// Get-NetFirewallProfile prints.
type FirewallProfile struct {
	Name                    string `json:"Name"`
	Enabled                 string `json:"Enabled"`
	AllowLocalFirewallRules string `json:"AllowLocalFirewallRules"`
}

// PSProfiles reads every profile from the ActiveStore, the policy the
// firewall enforces after merging group policy into the local store.
const PSProfiles = `$ErrorActionPreference='Stop'
$out = @(Get-NetFirewallProfile -PolicyStore ActiveStore | ForEach-Object {
  [pscustomobject]@{Name="$($_.Name)"; Enabled="$($_.Enabled)"; AllowLocalFirewallRules="$($_.AllowLocalFirewallRules)"}
})
ConvertTo-Json -InputObject $out -Compress -Depth 3`

// ErrFirewall wraps every reason the Offline user's block rules are not
// in force.
var ErrFirewall = errors.New("the Windows Firewall does not enforce agentbox's rules")

// FirewallProblems says why profiles do not enforce agentbox's rules,
// which are local rules for every profile: each of Domain, Private and
// Public must be enabled, and group policy must not ignore local rules
// (AllowLocalFirewallRules False). Anything but an explicit True for
// Enabled counts as off: agentbox does not guess.
func FirewallProblems(profiles []FirewallProfile) []string {
	var why []string
	seen := map[string]FirewallProfile{}
	for _, p := range profiles {
		seen[strings.ToLower(p.Name)] = p
	}
	for _, name := range []string{"Domain", "Private", "Public"} {
		p, ok := seen[strings.ToLower(name)]
		switch {
		case !ok:
			why = append(why, name+" profile: not reported")
			continue
		case !strings.EqualFold(p.Enabled, "True"):
			why = append(why, fmt.Sprintf("%s profile: firewall not enabled (Enabled=%s)", name, p.Enabled))
		}
		if strings.EqualFold(p.AllowLocalFirewallRules, "False") {
			why = append(why, name+" profile: group policy ignores local rules (AllowLocalFirewallRules=False), agentbox's included")
		}
	}
	return why
}
