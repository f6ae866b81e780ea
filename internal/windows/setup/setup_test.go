package setup

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/windows/acl"
)

func TestCheckMarker(t *testing.T) {
	good := &Marker{Version: Version, CreatedAt: time.Unix(1, 0).UTC(), OfflineSID: "S-1-5-21-1-2-3-1001",
		OnlineSID: "S-1-5-21-1-2-3-1002", GroupSID: "S-1-5-21-1-2-3-1003", Runner: `C:\ProgramData\agentbox\bin\agentbox-runner.exe`,
		ProxyPorts: []int{8080, 3128}}
	if err := CheckMarker(good, []int{3128, 8080, 8080}); err != nil {
		t.Fatalf("good marker: %v", err)
	}
	if err := CheckMarker(nil, nil); !errors.Is(err, ErrMissing) {
		t.Errorf("missing: %v", err)
	}
	old := *good
	old.Version = Version - 1
	if err := CheckMarker(&old, []int{3128, 8080}); !errors.Is(err, ErrOutdated) || !strings.Contains(err.Error(), "setup version") {
		t.Errorf("old version: %v", err)
	}
	// A run without a proxy needs no port; a proxy port outside what the
	// firewall opened (or a marker of a setup that opened none) means
	// setup must run again.
	if err := CheckMarker(good, nil); err != nil {
		t.Errorf("no proxy: %v", err)
	}
	if err := CheckMarker(good, []int{3128, 3129}); !errors.Is(err, ErrOutdated) || !strings.Contains(err.Error(), "ports 3128,8080 open") ||
		!strings.Contains(err.Error(), "needs 3129") {
		t.Errorf("port outside the open range: %v", err)
	}
	none := *good
	none.ProxyPorts = nil
	if err := CheckMarker(&none, []int{3128}); !errors.Is(err, ErrOutdated) || !strings.Contains(err.Error(), "ports none open") {
		t.Errorf("setup opened no port: %v", err)
	}
	b, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMarker(b)
	if err != nil || m.OfflineSID != good.OfflineSID || !m.CreatedAt.Equal(good.CreatedAt) {
		t.Fatalf("round trip: %+v, %v", m, err)
	}
	if _, err := ParseMarker([]byte(`{"version":1,"bogus":1}`)); err == nil {
		t.Error("unknown marker field accepted")
	}
}

func TestCredsFormat(t *testing.T) {
	c := &Creds{Version: CredsVersion,
		Offline: Account{User: OfflineUser, SID: "S-1-5-21-1-2-3-1001", Password: []byte{1, 2, 3}},
		Online:  Account{User: OnlineUser, SID: "S-1-5-21-1-2-3-1002", Password: []byte{4, 5}}}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"password_dpapi": "AQID"`) {
		t.Fatalf("password blob not base64 in file: %s", b)
	}
	got, err := ParseCreds(b)
	if err != nil || got.Account(false).User != OfflineUser || got.Account(true).User != OnlineUser {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{
		`{"version":2,"offline":{},"online":{}}`,
		`{"version":1,"offline":{"user":"a","sid":"S-1","password_dpapi":"AQ=="},"online":{}}`,
		`{"version":1,"extra":true}`,
	} {
		if _, err := ParseCreds([]byte(bad)); err == nil {
			t.Errorf("ParseCreds(%s) accepted", bad)
		}
	}
}

func TestNewPassword(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		p, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != PasswordLen || seen[p] {
			t.Fatalf("bad or repeated password %q", p)
		}
		seen[p] = true
		for _, class := range []string{lower, upper, digits, symbols} {
			if !strings.ContainsAny(p, class) {
				t.Fatalf("%q lacks a character of %q", p, class)
			}
		}
		if strings.ContainsAny(p, `"' ^&|<>`) {
			t.Fatalf("%q has a character that needs quoting", p)
		}
	}
}

func TestPayload(t *testing.T) {
	p := &Payload{Version: PayloadVersion, Mode: ModeFull, RealUserSID: "S-1-5-21-9-9-9-1001",
		Profile: `C:\Users\Dev`, Runner: `C:\Program Files\agentbox\agentbox-runner.exe`, ProxyPorts: []int{3128}}
	s, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(s, " \"\\/+=") {
		t.Fatalf("encoded payload needs quoting: %q", s)
	}
	got, err := DecodePayload(s)
	if err != nil || got.Profile != p.Profile || !slices.Equal(got.ProxyPorts, p.ProxyPorts) {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	for name, bad := range map[string]*Payload{
		"version":   {Version: 99, Mode: ModeCleanup},
		"mode":      {Version: PayloadVersion, Mode: "rm"},
		"no user":   {Version: PayloadVersion, Mode: ModeFull, Profile: `C:\U`, Runner: "r"},
		"no runner": {Version: PayloadVersion, Mode: ModeFull, Profile: `C:\U`, RealUserSID: "S-1-5-21-1"},
		"port":      {Version: PayloadVersion, Mode: ModeCleanup, ProxyPorts: []int{70000}},
		// The log is named by an id, never a path, and the SID it is
		// granted to goes into SDDL: both must be plain.
		"log path":    {Version: PayloadVersion, Mode: ModeCleanup, RealUserSID: "S-1-5-21-1", LogID: `..\..\Windows\x`},
		"log id":      {Version: PayloadVersion, Mode: ModeCleanup, RealUserSID: "S-1-5-21-1", LogID: "0123456789abcdef0123456789ABCDEF"},
		"log sddl":    {Version: PayloadVersion, Mode: ModeCleanup, RealUserSID: "S-1-5-21-1)(A;;FA;;;WD", LogID: strings.Repeat("a", 32)},
		"log no user": {Version: PayloadVersion, Mode: ModeCleanup, LogID: strings.Repeat("a", 32)},
	} {
		s, _ := bad.Encode()
		if _, err := DecodePayload(s); err == nil {
			t.Errorf("%s: bad payload accepted", name)
		}
	}
	if _, err := DecodePayload("!!"); err == nil {
		t.Error("garbage accepted")
	}
}

func TestOfflineRules(t *testing.T) {
	sid := "S-1-5-21-1-2-3-1001"
	rules := OfflineRules(sid, nil)
	if len(rules) != 2 || rules[0].Protocol != "Any" || rules[0].RemoteAddress != "Any" ||
		rules[0].LocalUser != "O:LSD:(A;;CC;;;"+sid+")" || rules[0].Profile != "Any" ||
		rules[0].Direction != "Outbound" || rules[0].Action != "Block" || !rules[0].Enabled {
		t.Fatalf("no proxy: %+v", rules)
	}
	checkInbound(t, rules[1], sid)
	// Golden: the rule set with proxy ports, field by field.
	rules = OfflineRules(sid, []int{8080, 3128, 3128})
	user := LocalUserSDDL(sid)
	out := Rule{Direction: "Outbound", Action: "Block", Enabled: true, Profile: "Any", RemotePort: "Any", LocalUser: user}
	want := []Rule{out, out, out, out}
	want[0].Name, want[0].Protocol, want[0].RemoteAddress = RulePrefix+"offline-block-remote", "Any",
		"0.0.0.0-126.255.255.255,128.0.0.0-255.255.255.255,::,::2-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	want[1].Name, want[1].Protocol, want[1].RemoteAddress = RulePrefix+"offline-block-loopback-udp", "UDP", "127.0.0.0-127.255.255.255,::1"
	want[2].Name, want[2].Protocol, want[2].RemoteAddress = RulePrefix+"offline-block-loopback-other", "TCP", "127.0.0.0,127.0.0.2-127.255.255.255,::1"
	want[3].Name, want[3].Protocol, want[3].RemoteAddress = RulePrefix+"offline-block-loopback-tcp", "TCP", "127.0.0.1"
	want[3].RemotePort = "1-3127,3129-8079,8081-65535"
	if len(rules) != 5 || !slices.Equal(rules[:4], want) {
		t.Fatalf("proxy rules:\n got %+v\nwant %+v", rules, want)
	}
	checkInbound(t, rules[4], sid)
	// Together the rules cover every address: remote + loopback.
	if !sameAddresses(rules[0].RemoteAddress+","+loopback, "Any") ||
		!sameAddresses(rules[2].RemoteAddress+","+rules[3].RemoteAddress, loopback) {
		t.Error("remote and loopback ranges do not add up to every address")
	}
}

// blockedBy models how the Windows Firewall decides an outbound packet of
// the Offline user against agentbox's rules: the default outbound action
// is allow and any matching enabled block rule blocks (block wins over
// allow, and agentbox adds no allow rule). It returns the blocking rule's
// name, "" when the connection goes through.
func blockedBy(t *testing.T, rules []Rule, proto string, to netip.AddrPort) string {
	t.Helper()
	for _, r := range rules {
		if r.Direction != "Outbound" || r.Action != "Block" || !r.Enabled {
			continue
		}
		if r.Protocol != "Any" && !strings.EqualFold(r.Protocol, proto) {
			continue
		}
		if r.RemoteAddress != "Any" {
			rs, ok := addrRanges(r.RemoteAddress)
			if !ok {
				t.Fatalf("rule %s: unparsable addresses %q", r.Name, r.RemoteAddress)
			}
			a := to.Addr()
			in := false
			for _, x := range rs {
				in = in || (a.Is4() == x.lo.Is4() && !a.Less(x.lo) && !x.hi.Less(a))
			}
			if !in {
				continue
			}
		}
		if r.RemotePort != "Any" && !portIn(t, r.RemotePort, int(to.Port())) {
			continue
		}
		return r.Name
	}
	return ""
}

func portIn(t *testing.T, list string, p int) bool {
	for _, f := range strings.Split(list, ",") {
		lo, hi, ok := strings.Cut(f, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad port list %q", list)
		}
		if a <= p && p <= b {
			return true
		}
	}
	return false
}

// TestOfflineRulesModel: with the proxy range open, the Offline user
// reaches TCP 127.0.0.1 on exactly those ports and nothing else; with no
// range, nothing at all.
func TestOfflineRulesModel(t *testing.T) {
	open := []int{41630, 41631, 41645}
	rules := OfflineRules("S-1-5-21-1-2-3-1001", open)
	none := OfflineRules("S-1-5-21-1-2-3-1001", nil)
	for _, tc := range []struct {
		proto, to string
		open      bool
	}{
		{"TCP", "127.0.0.1:41630", true},
		{"TCP", "127.0.0.1:41631", true},
		{"TCP", "127.0.0.1:41645", true},
		{"TCP", "127.0.0.1:41629", false},
		{"TCP", "127.0.0.1:41632", false},
		{"TCP", "127.0.0.1:41646", false},
		{"TCP", "127.0.0.1:1", false},
		{"TCP", "127.0.0.1:65535", false},
		{"TCP", "127.0.0.2:41630", false},
		{"TCP", "127.255.255.255:41630", false},
		{"TCP", "127.0.0.0:41630", false},
		{"TCP", "[::1]:41630", false},
		{"TCP", "[::]:41630", false},
		{"TCP", "[::2]:41630", false},
		{"TCP", "10.0.0.1:41630", false},
		{"TCP", "192.168.1.5:41630", false},
		{"TCP", "0.0.0.0:41630", false},
		{"TCP", "128.0.0.1:41630", false},
		{"TCP", "126.255.255.255:41630", false},
		{"TCP", "[2001:db8::1]:443", false},
		{"UDP", "127.0.0.1:41630", false},
		{"UDP", "127.0.0.1:53", false},
		{"UDP", "[::1]:41630", false},
		{"UDP", "8.8.8.8:53", false},
		{"ICMPv4", "8.8.8.8:0", false},
	} {
		to := netip.MustParseAddrPort(tc.to)
		by := blockedBy(t, rules, tc.proto, to)
		if (by == "") != tc.open {
			t.Errorf("%s %s: blocked by %q, want open=%v", tc.proto, tc.to, by, tc.open)
		}
		if by := blockedBy(t, none, tc.proto, to); by == "" {
			t.Errorf("%s %s: open without proxy ports", tc.proto, tc.to)
		}
	}
}

func TestPortComplement(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, "1-65535"},
		{[]int{1}, "2-65535"},
		{[]int{65535}, "1-65534"},
		{[]int{2, 3, 5}, "1,4,6-65535"},
	} {
		if got := PortComplement(tc.in); got != tc.want {
			t.Errorf("PortComplement(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDriftAndPlan(t *testing.T) {
	sid := "S-1-5-21-1-2-3-1001"
	want := OfflineRules(sid, []int{3128})
	// What Get-NetFirewallRule gives back for a correct rule set: own
	// spelling of lists and subnets.
	have := slices.Clone(want)
	have[1].RemoteAddress = "127.0.0.0/255.0.0.0, ::1"
	have[2].RemoteAddress = "::1, 127.0.0.2-127.255.255.255, 127.0.0.0"
	have[3].RemotePort = "3129-65535, 1-3127"
	rm, cr, why := FirewallPlan(want, have)
	if len(rm)+len(cr) != 0 {
		t.Fatalf("correct rules seen as drifted: %v", why)
	}
	// Drift: someone widened the user scope and disabled a rule; a stale
	// agentbox rule is left over; a foreign rule is never touched.
	have[0].LocalUser = "O:LSD:(A;;CC;;;WD)"
	have[3].Enabled = false
	have = append(have, Rule{Name: RulePrefix + "offline-block-all"}, Rule{Name: "Core Networking"})
	rm, cr, why = FirewallPlan(want, have)
	if !slices.Equal(rm, []string{want[0].Name, want[3].Name, RulePrefix + "offline-block-all"}) || len(cr) != 2 {
		t.Fatalf("remove %v create %v (%v)", rm, cr, why)
	}
	// Upgrading from setup version 2, whose loopback TCP rule covered
	// every loopback address: the rule is rewritten narrower, the new
	// rule for the other loopback addresses created.
	v2 := slices.Clone(want[:2])
	v2 = append(v2, Rule{Name: RulePrefix + "offline-block-loopback-tcp", Direction: "Outbound", Action: "Block", Enabled: true,
		Profile: "Any", Protocol: "TCP", RemoteAddress: loopback, RemotePort: "1-3127,3129-65535", LocalUser: want[0].LocalUser}, want[4])
	rm, cr, why = FirewallPlan(want, v2)
	if !slices.Equal(rm, []string{RulePrefix + "offline-block-loopback-tcp"}) || len(cr) != 2 ||
		cr[0].Name != RulePrefix+"offline-block-loopback-other" || cr[1].RemoteAddress != "127.0.0.1" {
		t.Fatalf("upgrade: remove %v create %+v (%v)", rm, cr, why)
	}
	rm, cr, _ = FirewallPlan(want, nil)
	if len(rm) != 0 || len(cr) != 5 {
		t.Fatalf("from nothing: remove %v create %d", rm, len(cr))
	}
}

func TestPSCreateQuoting(t *testing.T) {
	r := OfflineRules("S-1-5-21-1-2-3-1001", []int{3128})[3]
	ps := PSCreate(r)
	for _, want := range []string{"-Name 'agentbox-sandbox-offline-block-loopback-tcp'", "-Direction Outbound", "-Action Block",
		"-Profile Any", "-Protocol TCP", "-RemotePort @('1-3127','3129-65535')", "-LocalUser 'O:LSD:(A;;CC;;;S-1-5-21-1-2-3-1001)'",
		"-RemoteAddress @('127.0.0.1')"} {
		if !strings.Contains(ps, want) {
			t.Errorf("PSCreate lacks %q:\n%s", want, ps)
		}
	}
	if all := PSCreate(OfflineRules("S-1-5-21-1-2-3-1001", nil)[0]); strings.Contains(all, "-RemotePort") ||
		!strings.Contains(all, "-Protocol Any -RemoteAddress 'Any'") {
		t.Errorf("any-protocol rule: %s", all)
	}
	if got := psQuote("it's"); got != "'it''s'" {
		t.Errorf("psQuote = %s", got)
	}
	if got := PSRemove([]string{"a", "b'c"}); got != "Remove-NetFirewallRule -Name @('a','b''c') -ErrorAction SilentlyContinue" {
		t.Errorf("PSRemove = %s", got)
	}
}

func TestSameAddresses(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		eq   bool
	}{
		{"127.0.0.0-127.255.255.255", "127.0.0.0/8", true},
		{"127.0.0.0-127.255.255.255", "127.0.0.0/255.0.0.0", true},
		{"10.0.0.1", "10.0.0.1-10.0.0.1", true},
		{"10.0.0.0-10.0.0.9,10.0.0.10-10.0.0.20", "10.0.0.0-10.0.0.20", true},
		{"127.0.0.0/8", "127.0.0.0/16", false},
		{"::1", "::1,127.0.0.1", false},
		{"LocalSubnet", "localsubnet", true},
	} {
		if got := sameAddresses(tc.a, tc.b); got != tc.eq {
			t.Errorf("sameAddresses(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestPlanReadGrants(t *testing.T) {
	tree := map[string][]string{
		`C:\Users\Dev`:                           {".ssh", ".gitconfig", "src", "AppData", ".AWS", "go"},
		`C:\Users\Dev\AppData`:                   {"Local", "Roaming", "LocalLow"},
		`C:\Users\Dev\AppData\Local`:             {"Programs", "Google", "Microsoft"},
		`C:\Users\Dev\AppData\Local\Google`:      {"Chrome", "Cloud SDK"},
		`C:\Users\Dev\AppData\Local\Microsoft`:   {"Edge", "WindowsApps", "Credentials", "Vault"},
		`C:\Users\Dev\AppData\Roaming`:           {"Microsoft", "npm", "Mozilla"},
		`C:\Users\Dev\AppData\Roaming\Microsoft`: {"Protect", "Credentials", "Crypto", "Vault", "SystemCertificates", "Windows"},
	}
	list := func(d string) ([]string, error) { return tree[d], nil }
	got, err := PlanReadGrants(`C:\Users\Dev\`, []string{`C:\Windows`}, list)
	if err != nil {
		t.Fatal(err)
	}
	inherit := map[string]bool{}
	for _, g := range got {
		inherit[g.Path] = g.Inherit
	}
	wantTree := []string{`C:\Windows`, `C:\Users\Dev\.gitconfig`, `C:\Users\Dev\src`, `C:\Users\Dev\go`,
		`C:\Users\Dev\AppData\LocalLow`, `C:\Users\Dev\AppData\Local\Programs`, `C:\Users\Dev\AppData\Local\Google\Cloud SDK`,
		`C:\Users\Dev\AppData\Local\Microsoft\WindowsApps`, `C:\Users\Dev\AppData\Roaming\npm`, `C:\Users\Dev\AppData\Roaming\Microsoft\Windows`}
	wantSelf := []string{`C:\Users\Dev`, `C:\Users\Dev\AppData`, `C:\Users\Dev\AppData\Local`, `C:\Users\Dev\AppData\Local\Google`,
		`C:\Users\Dev\AppData\Local\Microsoft`, `C:\Users\Dev\AppData\Roaming`, `C:\Users\Dev\AppData\Roaming\Microsoft`}
	for _, p := range wantTree {
		if v, ok := inherit[p]; !ok || !v {
			t.Errorf("%s: want an inheritable grant, got present=%v inherit=%v", p, ok, v)
		}
	}
	for _, p := range wantSelf {
		if v, ok := inherit[p]; !ok || v {
			t.Errorf("%s: want a this-directory-only grant, got present=%v inherit=%v", p, ok, v)
		}
	}
	if len(got) != len(wantTree)+len(wantSelf) {
		t.Errorf("got %d grants, want %d: %+v", len(got), len(wantTree)+len(wantSelf), got)
	}
	for _, g := range got {
		for _, e := range []string{".ssh", ".AWS", "Chrome", "Edge", "Protect", "Credentials", "Vault", "Mozilla", "Crypto", "SystemCertificates"} {
			if strings.HasSuffix(g.Path, `\`+e) {
				t.Errorf("excluded %s granted", g.Path)
			}
		}
	}
}

func TestReadable(t *testing.T) {
	group := "S-1-5-21-1-2-3-1003"
	tree := Grant{Path: `C:\Windows`, Inherit: true}
	self := Grant{Path: `C:\Users\Dev`}
	for _, tc := range []struct {
		sddl       string
		tree, self bool
	}{
		// C:\Windows as shipped: Users have read/execute on the tree.
		{"D:PAI(A;OICIIO;GA;;;CO)(A;OICI;FA;;;SY)(A;OICI;0x1200a9;;;BU)", true, true},
		// A profile: only the user, SYSTEM and Administrators.
		{"D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;S-1-5-21-9-9-9-1001)", false, false},
		// Our own grant from a previous run.
		{"D:(A;OICI;0x1200a9;;;" + group + ")(A;OICI;FA;;;SY)", true, true},
		// Our this-directory-only grant does not cover a tree.
		{"D:(A;;0x1200a9;;;" + group + ")(A;OICI;FA;;;SY)", false, true},
		// Inherit-only and partial masks do not count.
		{"D:(A;OICIIO;0x1200a9;;;BU)(A;OICI;FR;;;WD)", false, false},
		// C:\Windows on Windows 10/11: the Users grant is split into one
		// ACE for the directory and an inherit-only one for the tree.
		{"D:PAI(A;OICIIO;GA;;;CO)(A;OICIIO;GA;;;SY)(A;;0x1301bf;;;SY)(A;OICIIO;GA;;;BA)(A;;0x1301bf;;;BA)(A;OICIIO;GXGR;;;BU)(A;;0x1200a9;;;BU)(A;CIIO;GA;;;S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464)(A;;FA;;;S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464)", true, true},
		// Split by object type (OI and CI apart) still covers the tree.
		{"D:(A;;0x1200a9;;;AU)(A;OIIO;GXGR;;;AU)(A;CIIO;GXGR;;;BU)", true, true},
		// Files only, or the immediate children only, is not the tree.
		{"D:(A;;0x1200a9;;;BU)(A;OIIO;GXGR;;;BU)", false, true},
		{"D:(A;;0x1200a9;;;BU)(A;OICINPIO;GXGR;;;BU)", false, true},
	} {
		d, err := acl.ParseDACL(tc.sddl)
		if err != nil {
			t.Fatal(err)
		}
		if got := Readable(d, tree, group); got != tc.tree {
			t.Errorf("%s tree: %v", tc.sddl, got)
		}
		if got := Readable(d, self, group); got != tc.self {
			t.Errorf("%s self: %v", tc.sddl, got)
		}
	}
	// The ACE a grant adds makes it readable: the second run is a no-op.
	d, _ := acl.ParseDACL("D:P(A;OICI;FA;;;SY)")
	for _, g := range []Grant{tree, self} {
		d2 := *d
		d2.ACEs = slices.Clone(d.ACEs)
		if _, err := d2.Add(g.ACE(group)); err != nil {
			t.Fatal(err)
		}
		if !Readable(&d2, g, group) {
			t.Errorf("after adding %s, %+v still not readable", g.ACE(group), g)
		}
	}
}

func TestSystemReadRoots(t *testing.T) {
	env := map[string]string{"SystemRoot": `C:\WINDOWS`, "ProgramFiles": `C:\Program Files`, "ProgramW6432": `C:\Program Files`,
		"ProgramFiles(x86)": `C:\Program Files (x86)`, "ProgramData": `C:\ProgramData\`}
	got := SystemReadRoots(func(k string) string { return env[k] })
	want := []string{`C:\WINDOWS`, `C:\Program Files`, `C:\Program Files (x86)`, `C:\ProgramData`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestGrantsFile(t *testing.T) {
	var g Grants
	if !g.Add(`C:\a`) || g.Add(`c:\A`) || !g.Add(`C:\b`) {
		t.Fatal("Add does not de-duplicate case-insensitively")
	}
	if _, err := ParseGrants([]byte(`{"version":1,"paths":["x"],"done":true}`)); err != nil {
		t.Fatal(err)
	}
}

// agentbox-setup's report goes into the administrator-owned state
// directory, at a name derived only from a validated id, never into the
// user's %TEMP% (a writable root of the sandbox, where the name could be
// swapped for a link the administrator would then write through).
func TestLogPath(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	if !ValidLogID(id) {
		t.Fatal("valid id refused")
	}
	for _, bad := range []string{"", "abc", id + "0", `0123456789abcdef0123456789abcde\`, "0123456789abcdef0123456789abcdeg"} {
		if ValidLogID(bad) {
			t.Errorf("ValidLogID(%q) = true", bad)
		}
	}
	if got, want := LogPath(`C:\ProgramData\agentbox`, id), `C:\ProgramData\agentbox\logs\setup-`+id+`.log`; got != want {
		t.Errorf("LogPath = %q, want %q", got, want)
	}
	sddl := logSDDL("S-1-5-21-1-2-3-1001")
	if !strings.HasPrefix(sddl, "O:BAD:P") || strings.Contains(sddl, "WD") || strings.Contains(sddl, ";BU)") {
		t.Errorf("log SDDL %s: want owner Administrators, protected, no Everyone/Users", sddl)
	}
	p := &Payload{Version: PayloadVersion, Mode: ModeCleanup, RealUserSID: "S-1-5-21-1-2-3-1001", LogID: id}
	s, _ := p.Encode()
	if got, err := DecodePayload(s); err != nil || got.LogID != id {
		t.Errorf("payload with a log id: %+v, %v", got, err)
	}
}

// checkInbound: the Offline user's listeners are unreachable from other
// machines (loopback stays open for local dev servers).
func checkInbound(t *testing.T, r Rule, sid string) {
	t.Helper()
	if r.Name != RulePrefix+"offline-block-inbound" || r.Direction != "Inbound" || r.Action != "Block" || !r.Enabled ||
		r.Protocol != "Any" || r.Profile != "Any" || r.LocalUser != LocalUserSDDL(sid) {
		t.Errorf("inbound rule %+v", r)
	}
	if !sameAddresses(r.RemoteAddress+","+loopback, "Any") || strings.Contains(r.RemoteAddress, "127.0.0.1") {
		t.Errorf("inbound rule covers %q, want every non-loopback address", r.RemoteAddress)
	}
}

func TestFirewallProblems(t *testing.T) {
	on := func(n string) FirewallProfile {
		return FirewallProfile{Name: n, Enabled: "True", AllowLocalFirewallRules: "NotConfigured"}
	}
	if why := FirewallProblems([]FirewallProfile{on("Domain"), on("Private"), on("Public")}); len(why) != 0 {
		t.Errorf("all enabled: %v", why)
	}
	off := on("Public")
	off.Enabled = "False"
	gpo := on("Domain")
	gpo.AllowLocalFirewallRules = "False"
	unknown := on("Private")
	unknown.Enabled = "NotConfigured"
	for name, c := range map[string]struct {
		profiles []FirewallProfile
		want     string
	}{
		"public off":       {[]FirewallProfile{on("Domain"), on("Private"), off}, "Public profile: firewall not enabled"},
		"local rules":      {[]FirewallProfile{gpo, on("Private"), on("Public")}, "ignores local rules"},
		"missing profile":  {[]FirewallProfile{on("Domain"), on("Public")}, "Private profile: not reported"},
		"not configured":   {[]FirewallProfile{on("Domain"), unknown, on("Public")}, "Private profile: firewall not enabled"},
		"nothing reported": {nil, "Domain profile: not reported"},
	} {
		why := FirewallProblems(c.profiles)
		if !slices.ContainsFunc(why, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: %v, want %q", name, why, c.want)
		}
	}
	if !strings.Contains(PSProfiles, "-PolicyStore ActiveStore") {
		t.Error("PSProfiles must read the merged (active) policy")
	}
}
