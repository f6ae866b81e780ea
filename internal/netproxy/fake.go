package netproxy

import (
	"net/netip"
	"sync"
)

// Transparent networking (Linux): the sandbox's name server answers an
// allowed name with an address of its own, taken from [FakePrefix], and
// a connection the command makes to it is carried, by that name, to the
// proxy ([Server.ServeTransparent]), which resolves the name on the host
// and applies the allow-list exactly as for a proxy request. The real
// address never reaches the sandbox.
//
// The fake addresses live here, beside the transparent front end that
// turns them back into names, rather than in internal/nameserver, which
// hands them out: the name server records its refusals with this
// package's [Recorder], so it imports netproxy, and the reverse import
// would be a cycle.

// FakePrefix is where the fake addresses come from: 198.18.0.0/15, the
// benchmarking range (RFC 2544), which no public host uses and which
// fake-address resolvers conventionally take.
var FakePrefix = netip.MustParsePrefix("198.18.0.0/15")

// FakePrefix6 is where the fake IPv6 addresses come from: a unique local
// prefix (RFC 4193) whose last 32 bits are the name's fake IPv4 address,
// so that a name has one address of each family, given together.
var FakePrefix6 = netip.MustParsePrefix("fd61:6765:6e74:6278::/96")

// Fake6 is the fake IPv6 address of fake IPv4 address a.
func Fake6(a netip.Addr) netip.Addr {
	b := FakePrefix6.Addr().As16()
	v4 := a.As4()
	copy(b[12:], v4[:])
	return netip.AddrFrom16(b)
}

// IsFake reports whether a is in either fake prefix.
func IsFake(a netip.Addr) bool {
	a = a.Unmap()
	return FakePrefix.Contains(a) || FakePrefix6.Contains(a)
}

// MaxFakeNames bounds the names one sandbox (a run, or a session) is
// given addresses for: a command asking for endless distinct allowed
// names (under a wildcard) cannot grow agentbox's memory without limit.
// Later names are refused, never given an address already handed out,
// so that a connection cannot reach one name under another's address.
const MaxFakeNames = 16384

// ReasonTooManyNames is the refusal of a name asked for once a sandbox
// holds MaxFakeNames.
const ReasonTooManyNames = "too many distinct names (limit reached)"

// FakeNames is one sandbox's map between the names its name server
// answered and their fake addresses: stable for the sandbox's life (a
// name keeps its address, an address its name), and safe for concurrent
// use by the name server and the proxy.
type FakeNames struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   uint32 // the offset in FakePrefix of the next address given
}

// NewFakeNames returns an empty map.
func NewFakeNames() *FakeNames {
	return &FakeNames{byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: 1}
}

// Addr is name's fake address, given now if name has none yet; false
// when the map is full. name must be canonical (as the allow-list's
// DecideName returns it).
func (f *FakeNames) Addr(name string) (netip.Addr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.byName[name]; ok {
		return a, true
	}
	if len(f.byName) >= MaxFakeNames {
		return netip.Addr{}, false
	}
	base := FakePrefix.Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	// No .0 or .255 addresses: some clients take them for network or
	// broadcast addresses. MaxFakeNames is far below the prefix's size.
	for f.next&0xff == 0 || f.next&0xff == 0xff {
		f.next++
	}
	n += f.next
	f.next++
	a := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	f.byName[name], f.byAddr[a] = a, name
	return a, true
}

// Name is the name fake address a (of either family) was given; false
// for an address never given (or in neither fake prefix).
func (f *FakeNames) Name(a netip.Addr) (string, bool) {
	if f == nil {
		return "", false
	}
	if a = a.Unmap(); FakePrefix6.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.byAddr[a.Unmap()]
	return n, ok
}
