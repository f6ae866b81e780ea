package netpolicy

import (
	"net/netip"
	"testing"
)

// TestDecideName: the name server's decision, before any port is known.
func TestDecideName(t *testing.T) {
	r, err := ParseRules([]string{"good.test", "*.wild.test", "port.test:22", "10.0.0.0/8"}, "a",
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
	if d := (&Rules{Off: true, Allowed: r.Allowed}).DecideName("good.test"); d.Allow || d.Reason != ReasonNetworkOff {
		t.Errorf("off: %+v", d)
	}
	if got := r.AllowedPrefixes(); len(got) != 1 || got[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("AllowedPrefixes: %v", got)
	}
}

// TestFakeNames: stable addresses inside the prefix, both families,
// nothing for addresses never given.
func TestFakeNames(t *testing.T) {
	f := NewFakeNames()
	a, _ := f.Addr("a.test")
	b, _ := f.Addr("b.test")
	if again, _ := f.Addr("a.test"); again != a || a == b || !FakePrefix.Contains(a) || !FakePrefix.Contains(b) {
		t.Errorf("a %v (again %v), b %v", a, again, b)
	}
	for _, c := range []struct {
		addr netip.Addr
		name string
	}{
		{a, "a.test"}, {Fake6(a), "a.test"}, {netip.AddrFrom16(a.As16()), "a.test"}, {b, "b.test"},
	} {
		if n, ok := f.Name(c.addr); !ok || n != c.name {
			t.Errorf("%v: %q %v", c.addr, n, ok)
		}
	}
	for _, x := range []string{"198.18.200.200", "10.0.0.1", "fd61:6765:6e74:6278::1:2", "::1"} {
		if n, ok := f.Name(netip.MustParseAddr(x)); ok {
			t.Errorf("%s maps to %q", x, n)
		}
	}
	if !IsFake(Fake6(a)) || !IsFake(a) || IsFake(netip.MustParseAddr("10.0.0.1")) {
		t.Error("IsFake")
	}
	var nilMap *FakeNames
	if _, ok := nilMap.Name(a); ok {
		t.Error("a nil map names an address")
	}
}
