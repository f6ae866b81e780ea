package netproxy

import (
	"net/netip"
	"testing"
)

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
