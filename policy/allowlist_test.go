package policy

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func mustRules(t *testing.T, allowed, denied []string, local bool) *AllowList {
	t.Helper()
	r, err := parseAllowList(allowed, "allowed_domains", denied, "denied_domains", local)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDecide is the policy as a table: every request form a client (or an
// attacker) can send, and what the proxy must do with it before any look-up.
func TestDecide(t *testing.T) {
	r := mustRules(t, []string{
		"allowed.com", "*.wild.com", "port.com:443", "10.1.2.3", "192.168.0.0/16",
		"[2001:db8::1]:8443", "bücher.de", "*.github.com", "github.com",
	}, []string{"gist.github.com", "192.168.7.0/24", "blocked.wild.com"}, false)
	type want int
	const (
		deny want = iota
		resolve
		addr
	)
	cases := []struct {
		host   string
		port   uint16
		want   want
		reason string // substring of the refusal
		shown  string // Decision.Host, when checked
	}{
		{"allowed.com", 443, resolve, "", "allowed.com"},
		{"allowed.com", 80, resolve, "", ""},
		// Suffix confusion.
		{"allowed.com.evil.com", 443, deny, ReasonNotAllowed, ""},
		{"evilallowed.com", 443, deny, ReasonNotAllowed, ""},
		{"sub.allowed.com", 443, deny, ReasonNotAllowed, ""},
		{"allowed.co", 443, deny, ReasonNotAllowed, ""},
		// Trailing dots and case.
		{"allowed.com.", 443, resolve, "", "allowed.com"},
		{"ALLOWED.Com", 443, resolve, "", "allowed.com"},
		{"allowed.com..", 443, deny, "malformed", ""},
		{".allowed.com", 443, deny, "malformed", ""},
		// Wildcards.
		{"a.wild.com", 443, resolve, "", ""},
		{"a.b.wild.com", 443, resolve, "", ""},
		{"wild.com", 443, deny, ReasonNotAllowed, ""},
		{"xwild.com", 443, deny, ReasonNotAllowed, ""},
		{"blocked.wild.com", 443, deny, ReasonDenied, ""},
		{"BLOCKED.wild.com.", 443, deny, ReasonDenied, ""},
		// Deny wins over allow (gist.github.com is under *.github.com).
		{"gist.github.com", 443, deny, ReasonDenied, ""},
		{"github.com", 443, resolve, "", ""},
		{"api.github.com", 443, resolve, "", ""},
		// Ports.
		{"port.com", 443, resolve, "", ""},
		{"port.com", 80, deny, ReasonNotAllowed, ""},
		{"port.com", 0, deny, "port 0", ""},
		// IDNA: Unicode compared in punycode, either way round.
		{"bücher.de", 443, resolve, "", "xn--bcher-kva.de"},
		{"xn--bcher-kva.de", 443, resolve, "", ""},
		{"BÜCHER.de", 443, resolve, "", "xn--bcher-kva.de"},
		{"xn--bcher-kva.de.evil", 443, deny, ReasonNotAllowed, ""},
		{"xn--.de", 443, deny, "malformed", ""},
		// NUL and other bytes outside hostname syntax.
		{"evil.com\x00.allowed.com", 443, deny, "malformed", `"evil.com\x00.allowed.com"`},
		{"allowed.com\x00", 443, deny, "malformed", ""},
		{"allowed.com\n", 443, deny, "malformed", ""},
		{"allowed.com/x", 443, deny, "malformed", ""},
		{"allowed.com:443", 443, deny, "malformed", ""},
		{"user@allowed.com", 443, deny, "malformed", ""},
		{"allowed .com", 443, deny, "malformed", ""},
		{"", 443, deny, "malformed", `""`},
		{"-a.allowed.com", 443, deny, "hyphen", ""},
		// Bare addresses: only when listed.
		{"10.1.2.3", 443, addr, "", "10.1.2.3"},
		{"10.1.2.4", 443, deny, ReasonNotAllowed, ""},
		{"192.168.1.1", 22, addr, "", ""},
		{"192.168.7.1", 22, deny, ReasonDenied, ""},
		{"8.8.8.8", 53, deny, ReasonNotAllowed, ""},
		// Numeric forms are addresses, never names.
		{"2130706433", 80, deny, ReasonNotAllowed, "127.0.0.1"},
		{"0177.0.0.1", 80, deny, ReasonNotAllowed, "127.0.0.1"},
		{"0x7f.1", 80, deny, ReasonNotAllowed, "127.0.0.1"},
		{"127.1", 80, deny, ReasonNotAllowed, "127.0.0.1"},
		{"0x0a.1.2.3", 80, addr, "", "10.1.2.3"},
		{"012.1.2.3", 80, addr, "", "10.1.2.3"},
		{"167838211", 80, addr, "", "10.1.2.3"},
		{"10.1.2.3.", 80, addr, "", "10.1.2.3"},
		{"999.1.1.1", 80, deny, "malformed numeric", ""},
		{"1.2.3.4.5", 80, deny, "malformed numeric", ""},
		{"allowed.com.1", 80, deny, "malformed numeric", ""},
		{"08.1.2.3", 80, deny, "malformed numeric", ""},
		// IPv6: brackets, zones, IPv4-mapped.
		{"[2001:db8::1]", 8443, addr, "", "2001:db8::1"},
		{"2001:db8::1", 8443, addr, "", ""},
		{"2001:DB8:0::1", 8443, addr, "", "2001:db8::1"},
		{"[2001:db8::1]", 443, deny, ReasonNotAllowed, ""},
		{"fe80::1%eth0", 80, deny, "zone", ""},
		{"[fe80::1%25eth0]", 80, deny, "", ""},
		{"::ffff:10.1.2.3", 443, addr, "", "10.1.2.3"},
		{"[::ffff:10.1.2.3]", 443, addr, "", "10.1.2.3"},
		{"::ffff:a01:203", 443, addr, "", "10.1.2.3"},
		{"::ffff:127.0.0.1", 443, deny, ReasonNotAllowed, "127.0.0.1"},
		{"[10.1.2.3]", 443, deny, "malformed", ""},
		{"[allowed.com]", 443, deny, "malformed", ""},
		{"[::1", 443, deny, "malformed", ""},
		{"::1::2", 443, deny, "malformed", ""},
	}
	for _, c := range cases {
		d := r.Decide(c.host, c.port)
		var got want
		switch {
		case !d.Allow:
			got = deny
		case d.Resolve():
			got = resolve
		default:
			got = addr
		}
		if got != c.want {
			t.Errorf("Decide(%q, %d) = %+v, want %v", c.host, c.port, d, []string{"deny", "resolve", "addr"}[c.want])
			continue
		}
		if !d.Allow && !strings.Contains(d.Reason, c.reason) {
			t.Errorf("Decide(%q, %d) reason %q, want it to contain %q", c.host, c.port, d.Reason, c.reason)
		}
		if !d.Allow && d.Reason == "" {
			t.Errorf("Decide(%q, %d): refusal without a reason", c.host, c.port)
		}
		if c.shown != "" && d.Host != c.shown {
			t.Errorf("Decide(%q, %d).Host = %q, want %q", c.host, c.port, d.Host, c.shown)
		}
	}
}

// TestEmptyAllowListAllowsNothing: an empty allow-list is not "allow all".
func TestEmptyAllowListAllowsNothing(t *testing.T) {
	var r AllowList
	for _, h := range []string{"example.com", "127.0.0.1", "::1", "0.0.0.0"} {
		if d := r.Decide(h, 443); d.Allow {
			t.Errorf("empty rules allowed %s", h)
		}
	}
}

func TestAdmit(t *testing.T) {
	a := netip.MustParseAddr
	r := mustRules(t, []string{"ok.com", "10.9.9.9", "127.0.0.5"}, []string{"203.0.113.0/24"}, false)
	cases := []struct {
		addrs  []string
		ok     bool
		reason string
	}{
		{[]string{"93.184.216.34"}, true, ""},
		{[]string{"2606:2800:220:1::1"}, true, ""},
		{[]string{"127.0.0.1"}, false, "local address 127.0.0.1"},
		{[]string{"::1"}, false, "local"},
		{[]string{"::ffff:127.0.0.1"}, false, "local address 127.0.0.1"},
		{[]string{"10.0.0.1"}, false, "local"},
		{[]string{"172.16.3.4"}, false, "local"},
		{[]string{"192.168.1.1"}, false, "local"},
		{[]string{"169.254.169.254"}, false, "local"},
		{[]string{"100.64.0.1"}, false, "local"},
		{[]string{"fd00::1"}, false, "local"},
		{[]string{"fe80::1"}, false, "local"},
		{[]string{"224.0.0.1"}, false, "local"},
		{[]string{"ff02::1"}, false, "local"},
		{[]string{"0.0.0.0"}, false, "local"},
		{[]string{"::"}, false, "local"},
		{[]string{"255.255.255.255"}, false, "local"},
		{[]string{"64:ff9b::7f00:1"}, false, "local"},
		{[]string{"2002:7f00:1::1"}, false, "local"},
		{[]string{"::127.0.0.1"}, false, "local"},
		// Mixed answers are refused whole (DNS rebinding).
		{[]string{"93.184.216.34", "127.0.0.1"}, false, "local"},
		// A listed local address is admitted.
		{[]string{"10.9.9.9"}, true, ""},
		{[]string{"127.0.0.5"}, true, ""},
		// Denied ranges apply to resolved addresses too.
		{[]string{"203.0.113.7"}, false, ReasonDenied},
		{nil, false, "no address"},
	}
	for _, c := range cases {
		var in []netip.Addr
		for _, s := range c.addrs {
			in = append(in, a(s))
		}
		out, reason := r.Admit(443, in)
		if (reason == "") != c.ok || !strings.Contains(reason, c.reason) {
			t.Errorf("Admit(%v) = %v, %q; want ok=%v reason~%q", c.addrs, out, reason, c.ok, c.reason)
		}
		if c.ok && len(out) != len(in) {
			t.Errorf("Admit(%v) dropped addresses: %v", c.addrs, out)
		}
	}
	rl := mustRules(t, []string{"ok.com"}, []string{"10.0.0.0/8"}, true)
	if _, reason := rl.Admit(443, []netip.Addr{a("127.0.0.1")}); reason != "" {
		t.Errorf("allow_local_binding: loopback refused: %s", reason)
	}
	if _, reason := rl.Admit(443, []netip.Addr{a("10.1.1.1")}); !strings.Contains(reason, ReasonDenied) {
		t.Errorf("allow_local_binding must not override denied_domains: %q", reason)
	}
}

func TestParsePattern(t *testing.T) {
	good := map[string]pattern{
		"Example.COM.":        {Name: "example.com"},
		"*.example.com":       {Name: "example.com", Wildcard: true},
		"example.com:443":     {Name: "example.com", Port: 443},
		"*.example.com:8080":  {Name: "example.com", Wildcard: true, Port: 8080},
		"10.1.2.3":            {Prefix: netip.MustParsePrefix("10.1.2.3/32")},
		"10.1.2.3:22":         {Prefix: netip.MustParsePrefix("10.1.2.3/32"), Port: 22},
		"192.168.0.0/16":      {Prefix: netip.MustParsePrefix("192.168.0.0/16")},
		"::1":                 {Prefix: netip.MustParsePrefix("::1/128")},
		"[::1]:443":           {Prefix: netip.MustParsePrefix("::1/128"), Port: 443},
		"2001:db8::/32":       {Prefix: netip.MustParsePrefix("2001:db8::/32")},
		"::ffff:10.0.0.0/104": {Prefix: netip.MustParsePrefix("10.0.0.0/8")},
		"bücher.de":           {Name: "xn--bcher-kva.de"},
		"*.com":               {Name: "com", Wildcard: true},
	}
	for s, want := range good {
		p, err := parsePattern(s)
		if err != nil {
			t.Errorf("parsePattern(%q): %v", s, err)
			continue
		}
		want.Raw = s
		if p != want {
			t.Errorf("parsePattern(%q) = %+v, want %+v", s, p, want)
		}
	}
	bad := map[string]string{
		"":                    "empty",
		" example.com":        "white space",
		"exa mple.com":        "white space",
		"example.com\x00":     "NUL",
		"*":                   "wildcard",
		"**.example.com":      "wildcard",
		"*.":                  "wildcard",
		"*example.com":        "wildcard",
		"a.*.example.com":     "first label",
		"example.com:0":       "out of range",
		"example.com:65536":   "out of range",
		"example.com:-1":      "not a number",
		"example.com:":        "empty port",
		"example.com:http":    "not a number",
		"10.0.0.1/8":          "host bits",
		"10.0.0.0/33":         "CIDR",
		"https://example.com": "scheme",
		"example.com/path":    "path",
		"example..com":        "empty label",
		"-x.example.com":      "hyphen",
		"127.1":               "write 127.0.0.1",
		"0x7f000001":          "write 127.0.0.1",
		"999.1.1.1":           "neither",
		"fe80::1%eth0":        "zone",
		"[example.com]:443":   "brackets",
		"[::1]443":            "after ]",
		"user@example.com":    "not a host",
		"exa_mple.com:1:2":    "not a valid IPv6",
		"0\x8f0.example.com":  "not valid UTF-8",
	}
	for s, want := range bad {
		if _, err := parsePattern(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePattern(%q) = %v, want an error containing %q", s, err, want)
		}
	}
}

func TestParseAllowListNamesKey(t *testing.T) {
	_, err := parseAllowList([]string{"ok.com", "*"}, "--allow-domain", nil, "denied_domains", false)
	if err == nil || !strings.HasPrefix(err.Error(), "--allow-domain: ") || !strings.Contains(err.Error(), `"*"`) {
		t.Errorf("error should name the flag and the value: %v", err)
	}
	// Every malformed pattern is named, not only the first.
	_, err = parseAllowList([]string{"*", "ok.com", "a.test:70000"}, "allowed_domains", []string{"**.x"}, "denied_domains", false)
	for _, want := range []string{`allowed_domains: "*"`, `allowed_domains: "a.test:70000"`, `denied_domains: "**.x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want every bad pattern named, %q missing: %v", want, err)
		}
	}
	_, err = parseAllowList(nil, "allowed_domains", []string{"x/y"}, "network.denied_domains in c.toml", false)
	if err == nil || !strings.HasPrefix(err.Error(), "network.denied_domains in c.toml: ") {
		t.Errorf("error should name the key: %v", err)
	}
}

func TestParseIPv4Loose(t *testing.T) {
	cases := map[string]string{
		"0":           "0.0.0.0",
		"4294967295":  "255.255.255.255",
		"0xffffffff":  "255.255.255.255",
		"1.0x10.3":    "1.16.0.3",
		"1.2.65535":   "1.2.255.255",
		"0x":          "0.0.0.0",
		"4294967296":  "",
		"1.2.65536":   "",
		"1.256.1.1":   "",
		"1..1":        "",
		"0x1g":        "",
		"09":          "",
		"1.2.3.0x100": "",
	}
	for in, want := range cases {
		a, ok := parseIPv4Loose(in)
		if want == "" {
			if ok {
				t.Errorf("parseIPv4Loose(%q) = %v, want failure", in, a)
			}
			continue
		}
		if !ok || a.String() != want {
			t.Errorf("parseIPv4Loose(%q) = %v %v, want %s", in, a, ok, want)
		}
	}
}

// TestDecideName: the name server's decision, before any port is known.
func TestDecideName(t *testing.T) {
	r, err := parseAllowList([]string{"good.test", "*.wild.test", "port.test:22", "10.0.0.0/8"}, "a",
		[]string{"bad.wild.test", "half.wild.test:443"}, "d", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		allow bool
		host  string
	}{
		{"good.test", true, "good.test"},
		{"GOOD.test.", true, "good.test"},
		{"x.wild.test", true, "x.wild.test"},
		{"wild.test", false, "wild.test"},
		{"bad.wild.test", false, "bad.wild.test"},
		{"half.wild.test", true, "half.wild.test"}, // denied on 443 only: the proxy decides
		{"port.test", true, "port.test"},
		{"good.test.evil", false, "good.test.evil"},
		{"10.1.2.3", false, "10.1.2.3"},
		{"2130706433", false, "2130706433"},
		{"a..b", false, "a..b"},
		{"bücher.good.test", false, "xn--bcher-kva.good.test"},
	} {
		d := r.DecideName(c.name)
		if d.Allow != c.allow || d.Allow && d.Host != c.host {
			t.Errorf("%q: %+v, want allow=%v host %q", c.name, d, c.allow, c.host)
		}
	}
	if d := (&AllowList{off: true, allowed: r.allowed}).DecideName("good.test"); d.Allow || d.Reason != ReasonNetworkOff {
		t.Errorf("off: %+v", d)
	}
	if got := r.AllowedPrefixes(); len(got) != 1 || got[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("AllowedPrefixes: %v", got)
	}
}

// TestAllowListPublic: what a caller outside policy builds and reads.
func TestAllowListPublic(t *testing.T) {
	_, err := ParseAllowList([]string{"ok.test", "*"}, []string{"x/y"}, false)
	for _, want := range []string{`allowed_domains: "*"`, `denied_domains: "x/y"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAllowList error lacks %q: %v", want, err)
		}
	}
	l, err := ParseAllowList([]string{"ok.test", "10.0.0.0/8", "1.1.1.1", "[::1]:22", "127.1.0.0/16"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.LocalPatterns(), []string{"10.0.0.0/8", "[::1]:22", "127.1.0.0/16"}; !slices.Equal(got, want) {
		t.Errorf("LocalPatterns = %q, want %q", got, want)
	}
	off := NetworkOffList()
	for _, h := range []string{"ok.test", "1.1.1.1"} {
		if d := off.Decide(h, 443); d.Allow || d.Reason != ReasonNetworkOff {
			t.Errorf("network off, %s: %+v", h, d)
		}
	}
	if d := off.DecideName("ok.test"); d.Allow || d.Reason != ReasonNetworkOff {
		t.Errorf("network off, name ok.test: %+v", d)
	}
}

// TestAllowListJSON: the encoding is the patterns as written, and decoding
// parses them again, refusing what the parser refuses.
func TestAllowListJSON(t *testing.T) {
	for _, l := range []*AllowList{
		{},
		NetworkOffList(),
		mustRules(t, []string{"bücher.de", "*.wild.test:443", "10.0.0.0/8"}, []string{"bad.wild.test"}, true),
	} {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var again AllowList
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(&again, l) {
			t.Errorf("%s decoded to %+v, want %+v", b, again, *l)
		}
	}
	for _, b := range []string{
		`{"Allowed":["*"],"Denied":null,"AllowLocal":false,"Off":false}`,
		`{"Allowed":null,"Denied":null,"AllowLocal":false,"Off":false,"Name":"x"}`,
		`{"Allowed":null} {}`,
		`[]`,
	} {
		var l AllowList
		if err := json.Unmarshal([]byte(b), &l); err == nil {
			t.Errorf("decoded %s", b)
		}
	}
}

// FuzzAllowList: any pattern and request, no panic; a parsed list
// survives its encoding; an allowed request's shown host is canonical
// (asking again with it gives the same answer); a deny pattern wins.
func FuzzAllowList(f *testing.F) {
	for _, s := range [][2]string{
		{"example.com", "EXAMPLE.com."}, {"*.example.com", "a.example.com"}, {"10.0.0.0/8", "10.1.2.3"},
		{"[::1]:22", "[::1]"}, {"bücher.de", "xn--bcher-kva.de"}, {"127.0.0.1", "2130706433"}, {"x.test:80", "x.test\x00"},
	} {
		f.Add(s[0], s[1], uint16(443))
	}
	f.Fuzz(func(t *testing.T, pat, host string, port uint16) {
		l, err := ParseAllowList([]string{pat}, nil, false)
		if err != nil {
			return
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var again AllowList
		if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(&again, l) {
			t.Fatalf("%q: encoding %s decodes to %+v, %v", pat, b, again, err)
		}
		d := l.Decide(host, port)
		if d.Allow {
			if d2 := l.Decide(d.Host, port); !d2.Allow || d2.Host != d.Host {
				t.Errorf("%q allows %q as %q, but %q is %+v", pat, host, d.Host, d.Host, d2)
			}
			if d.Resolve() {
				// Admit may refuse, never panic.
				l.Admit(port, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.1")})
			}
		}
		denying, _ := ParseAllowList([]string{pat}, []string{pat}, true)
		if d := denying.Decide(host, port); d.Allow {
			t.Errorf("%q allowed and denied, yet %q is allowed", pat, host)
		}
		l.DecideName(host)
	})
}
