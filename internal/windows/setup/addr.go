package setup

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// sameAddresses reports whether two firewall address lists cover the same
// addresses. Windows stores what it is given in its own form (a range that
// is a subnet comes back as "127.0.0.0/255.0.0.0"), so a textual compare
// would see drift that is not there and rewrite the rules on every run.
func sameAddresses(a, b string) bool {
	ra, oka := addrRanges(a)
	rb, okb := addrRanges(b)
	if !oka || !okb {
		return strings.EqualFold(normList(a), normList(b))
	}
	return slices.Equal(ra, rb)
}

type addrRange struct{ lo, hi netip.Addr }

// addrRanges parses "Any", single addresses, "lo-hi" ranges and CIDR or
// mask subnets into merged, sorted ranges. ok is false for keywords it does
// not know (LocalSubnet, ...).
func addrRanges(s string) ([]addrRange, bool) {
	var rs []addrRange
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch {
		case strings.EqualFold(f, "Any"), strings.EqualFold(f, "*"):
			rs = append(rs, addrRange{netip.IPv4Unspecified(), netip.MustParseAddr("255.255.255.255")},
				addrRange{netip.IPv6Unspecified(), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")})
		case strings.Contains(f, "-"):
			lo, hi, _ := strings.Cut(f, "-")
			l, err1 := netip.ParseAddr(lo)
			h, err2 := netip.ParseAddr(hi)
			if err1 != nil || err2 != nil || l.Is4() != h.Is4() || h.Less(l) {
				return nil, false
			}
			rs = append(rs, addrRange{l, h})
		case strings.Contains(f, "/"):
			ip, bits, _ := strings.Cut(f, "/")
			a, err := netip.ParseAddr(ip)
			if err != nil {
				return nil, false
			}
			n, err := strconv.Atoi(bits)
			if err != nil {
				m, err := netip.ParseAddr(bits)
				if err != nil || !m.Is4() {
					return nil, false
				}
				n = maskBits(m)
				if n < 0 {
					return nil, false
				}
			}
			p, err := a.Prefix(n)
			if err != nil {
				return nil, false
			}
			rs = append(rs, addrRange{p.Addr(), lastAddr(p)})
		default:
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, false
			}
			rs = append(rs, addrRange{a, a})
		}
	}
	slices.SortFunc(rs, func(x, y addrRange) int { return x.lo.Compare(y.lo) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].lo.Is4() == r.lo.Is4() &&
			(!out[n-1].hi.Less(r.lo) || out[n-1].hi.Next() == r.lo) {
			if out[n-1].hi.Less(r.hi) {
				out[n-1].hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out, true
}

func maskBits(m netip.Addr) int {
	b := m.As4()
	n, seenZero := 0, false
	for _, x := range b {
		for i := 7; i >= 0; i-- {
			if x&(1<<i) != 0 {
				if seenZero {
					return -1
				}
				n++
			} else {
				seenZero = true
			}
		}
	}
	return n
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 1 << (7 - j)
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
