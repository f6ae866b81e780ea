package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rules is a parsed allow-list. The zero value allows nothing.
type Rules struct {
	Allowed, Denied []Pattern
	// AllowLocal admits names that resolve to loopback, private and other
	// local addresses ([network] allow_local_binding).
	AllowLocal bool
	// Off refuses every request as [ReasonNetworkOff]: the rules of the
	// proxy of a sandbox whose network is off, whose only task is to
	// make the tools that use it fail at once, with a reason, rather
	// than retry a network that is not there.
	Off bool
}

// Reasons for refusals, as printed in the run report and on stderr.
const (
	ReasonNotAllowed = "not in allowed_domains"
	ReasonDenied     = "in denied_domains"
	// ReasonNetworkOff is every refusal of a sandbox without network:
	// its proxy's, its name server's, its connects'.
	ReasonNetworkOff = "network off"
)

// Decision is the policy's answer about one requested destination.
type Decision struct {
	// Allow is false when the request is refused; Reason then says why.
	Allow  bool
	Reason string
	// Host is the destination as reported: the canonical name or
	// address, or a quoted form of a malformed request.
	Host string
	// Addr is the address requested when the request named one (then no
	// look-up may happen); invalid when it named a host name.
	Addr netip.Addr
}

// Resolve reports whether an allowed decision names a host that the proxy
// must look up and pass through [Rules.Admit].
func (d Decision) Resolve() bool { return d.Allow && !d.Addr.IsValid() }

// Decide is the policy decision for a request to host:port, made before any
// look-up. host is what the client sent: a name (any case, maybe with one
// trailing dot, maybe in Unicode), an IPv4 or IPv6 literal (brackets
// allowed), or a numeric form a resolver would read as IPv4. A denied name
// is never resolved, so a refused request leaks nothing through DNS.
func (r *Rules) Decide(host string, port uint16) Decision {
	d := r.decide(host, port)
	if r.Off && (d.Allow || d.Reason == ReasonNotAllowed || d.Reason == ReasonDenied) {
		d.Allow, d.Reason = false, ReasonNetworkOff
	}
	return d
}

func (r *Rules) decide(host string, port uint16) Decision {
	shown := displayHost(host)
	deny := func(reason string) Decision { return Decision{Host: shown, Reason: reason} }
	if port == 0 {
		return deny("port 0")
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c == 0x7f {
			return deny("malformed host name (control byte or space)")
		}
	}
	h := host
	bracketed := strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]")
	if bracketed {
		h = h[1 : len(h)-1]
	}
	var addr netip.Addr
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return deny("address with a zone")
		}
		if bracketed && !a.Is6() {
			return deny("malformed host name (brackets around an IPv4 address)")
		}
		addr = a.Unmap()
	} else if bracketed || strings.Contains(h, ":") {
		return deny("malformed IPv6 address")
	} else if endsInNumber(h) {
		a, ok := parseIPv4Loose(strings.TrimSuffix(h, "."))
		if !ok {
			return deny("malformed numeric host")
		}
		addr = a
	}
	if addr.IsValid() {
		d := Decision{Host: addr.String(), Addr: addr}
		switch {
		case r.matchAddr(r.Denied, addr, port):
			d.Reason = ReasonDenied
		case r.matchAddr(r.Allowed, addr, port):
			d.Allow = true
		default:
			d.Reason = ReasonNotAllowed
		}
		return d
	}
	name, err := canonicalName(h)
	if err != nil {
		return deny("malformed host name (" + err.Error() + ")")
	}
	d := Decision{Host: name}
	switch {
	case matchName(r.Denied, name, port):
		d.Reason = ReasonDenied
	case matchName(r.Allowed, name, port):
		d.Allow = true
	default:
		d.Reason = ReasonNotAllowed
	}
	return d
}

// Admit checks the addresses an allowed name resolved to. It returns them
// (unmapped) when every one may be connected to, or a reason when any may
// not: a name that mixes public and local addresses is refused whole, so
// which one a client would pick does not matter.
func (r *Rules) Admit(port uint16, addrs []netip.Addr) ([]netip.Addr, string) {
	if len(addrs) == 0 {
		return nil, "name has no address"
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		switch {
		case r.matchAddr(r.Denied, a, port):
			return nil, fmt.Sprintf("resolves to %s, %s", a, ReasonDenied)
		case IsLocal(a) && !r.AllowLocal && !r.matchAddr(r.Allowed, a, port):
			return nil, fmt.Sprintf("resolves to local address %s (allow_local_binding is off)", a)
		}
		out = append(out, a)
	}
	return out, ""
}

func matchName(ps []Pattern, name string, port uint16) bool {
	for _, p := range ps {
		if p.Name == "" || (p.Port != 0 && p.Port != port) {
			continue
		}
		if p.Wildcard {
			if strings.HasSuffix(name, "."+p.Name) {
				return true
			}
		} else if name == p.Name {
			return true
		}
	}
	return false
}

func (r *Rules) matchAddr(ps []Pattern, a netip.Addr, port uint16) bool {
	for _, p := range ps {
		if p.Name != "" || !p.Prefix.IsValid() || (p.Port != 0 && p.Port != port) {
			continue
		}
		if p.Prefix.Contains(a) {
			return true
		}
	}
	return false
}

// local lists ranges that are not the public internet beyond what netip's
// predicates cover.
var local = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // CGNAT
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated)
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:10::/28"),   // ORCHID
	netip.MustParsePrefix("ff00::/8"),       // multicast
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
}

// Prefixes whose addresses embed an IPv4 address that a gateway may reach.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixto4  = netip.MustParsePrefix("2002::/16")
	mapped  = netip.MustParsePrefix("::ffff:0:0/96")
	mapped2 = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT "translated"
)

// IsLocal reports whether a is loopback, private, link-local, CGNAT,
// multicast, unspecified or otherwise not a public unicast address,
// looking through the IPv6 forms that embed an IPv4 address.
func IsLocal(a netip.Addr) bool {
	a = a.WithZone("")
	if a.Is6() {
		b := a.As16()
		switch {
		case mapped.Contains(a), nat64.Contains(a), mapped2.Contains(a):
			return IsLocal(netip.AddrFrom4([4]byte(b[12:16])))
		case sixto4.Contains(a):
			if IsLocal(netip.AddrFrom4([4]byte(b[2:6]))) {
				return true
			}
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range local {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// displayHost is host as safe to print on a terminal and in JSON: itself
// when it is plain printable ASCII of reasonable length, else quoted.
func displayHost(h string) string {
	if len(h) > 255 {
		return strconv.Quote(h[:64]) + "..."
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.QuoteToASCII(h)
		}
	}
	if h == "" {
		return `""`
	}
	return h
}

// ParseRules parses allow and deny lists. Each error names the list
// (allowedKey or deniedKey, such as "Options.AllowDomains" or
// "network.allowed_domains in /x/config.toml") and the value; every
// malformed pattern is named, not only the first, so that one run (or
// `agentbox doctor`) shows all that needs fixing.
func ParseRules(allowed []string, allowedKey string, denied []string, deniedKey string, allowLocal bool) (*Rules, error) {
	r := &Rules{AllowLocal: allowLocal}
	var errs []error
	for _, s := range allowed {
		p, err := ParsePattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", allowedKey, err))
			continue
		}
		r.Allowed = append(r.Allowed, p)
	}
	for _, s := range denied {
		p, err := ParsePattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", deniedKey, err))
			continue
		}
		r.Denied = append(r.Denied, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// DecideName is the name server's decision about a look-up of name,
// made before any port is known: allowed when some allow pattern admits
// the name on some port and no deny pattern refuses it on every port
// (a pattern with a port leaves the other ports to the proxy, which
// decides each connection). Host is the canonical name. Addresses and
// malformed names are refused.
func (r *Rules) DecideName(name string) Decision {
	shown := displayHost(name)
	if r.Off {
		return Decision{Host: shown, Reason: ReasonNetworkOff}
	}
	h := strings.TrimSuffix(name, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c >= 0x7f {
			return Decision{Host: shown, Reason: "malformed host name"}
		}
	}
	if _, err := netip.ParseAddr(h); err == nil || endsInNumber(h) {
		return Decision{Host: shown, Reason: ReasonNotAllowed}
	}
	canon, err := canonicalName(h)
	if err != nil {
		return Decision{Host: shown, Reason: "malformed host name (" + err.Error() + ")"}
	}
	d := Decision{Host: canon}
	switch {
	case matchName(portless(r.Denied), canon, 0):
		d.Reason = ReasonDenied
	case matchAnyPort(r.Allowed, canon):
		d.Allow = true
	default:
		d.Reason = ReasonNotAllowed
	}
	return d
}

// portless are the patterns of ps that hold for every port.
func portless(ps []Pattern) []Pattern {
	var out []Pattern
	for _, p := range ps {
		if p.Port == 0 {
			out = append(out, p)
		}
	}
	return out
}

func matchAnyPort(ps []Pattern, name string) bool {
	for _, p := range ps {
		if matchName([]Pattern{p}, name, p.Port) {
			return true
		}
	}
	return false
}

// AllowedPrefixes are the ranges of the allow list's address patterns
// (any port): the bare addresses a transparent connection may be carried
// to, for the proxy to decide with its port.
func (r *Rules) AllowedPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range r.Allowed {
		if p.Name == "" && p.Prefix.IsValid() {
			out = append(out, p.Prefix)
		}
	}
	return out
}
