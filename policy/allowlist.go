package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// AllowList is the parsed form of [network] allowed_domains and
// denied_domains: the destinations a command may reach through
// agentbox's proxy when its network is otherwise off. It holds the
// decision in one pure function ([AllowList.Decide], completed by
// [AllowList.Admit] once a name has been resolved), so that every proxy
// front end (HTTP, SOCKS5, transparent, on every platform) and the
// sandbox's name server ([AllowList.DecideName]) ask the same question and
// get the same answer. Build one with [ParseAllowList]; the zero value
// allows nothing. An AllowList is never changed once built, so it may be
// shared and used concurrently.
//
// # Patterns
//
// A pattern is a host name, an IP address or a CIDR, optionally with a
// port: "example.com" matches only that name; "*.example.com" matches its
// subdomains and not example.com itself; "example.com:443",
// "10.1.2.3:22" and "[2001:db8::1]:8443" limit the port (without one,
// every port matches); "192.168.0.0/16" matches the addresses of the
// range. Names are compared case-insensitively, in their ASCII
// (punycode) form, after removing one trailing dot. A pattern has no
// scheme, path or user; a number that reads as an address (127.1,
// 0x7f.0.0.1) must be written as the plain dotted address.
//
// # Decisions
//
// A deny pattern wins over every allow pattern. A request for a bare
// address is allowed only when that address (or a CIDR holding it) is
// listed; numeric spellings a resolver would accept (2130706433,
// 0177.0.0.1, 0x7f.1, IPv4-mapped IPv6) are the address they denote.
// An allowed name is resolved once, and every address it resolves to
// must pass Admit: loopback, private, link-local, CGNAT, multicast and
// unspecified addresses are refused unless allow_local_binding is set
// or the address is itself listed. The proxy then connects to exactly
// the admitted address, so a name cannot be re-resolved elsewhere.
type AllowList struct {
	allowed, denied []pattern
	// allowLocal admits names that resolve to loopback, private and
	// other local addresses ([network] allow_local_binding).
	allowLocal bool
	// off refuses every request as [ReasonNetworkOff] ([NetworkOffList]).
	off bool
}

// ParseAllowList parses allow and deny patterns (see [AllowList]);
// allowLocal is [network] allow_local_binding. Every malformed pattern
// is named in the error, as allowed_domains or denied_domains, not only
// the first.
func ParseAllowList(allowed, denied []string, allowLocal bool) (*AllowList, error) {
	return parseAllowList(allowed, "allowed_domains", denied, "denied_domains", allowLocal)
}

// NetworkOffList is the allow-list of the proxy of a sandbox whose network
// is off: it refuses every request, and every name look-up, as
// [ReasonNetworkOff]. That proxy's only task is to make the tools that
// use it fail at once, with a reason, rather than retry a network that
// is not there.
func NetworkOffList() *AllowList { return &AllowList{off: true} }

// LocalPatterns are the allow patterns, as written, that list local
// addresses (loopback, private, link-local and the like): what opens a
// local destination without allow_local_binding.
func (l *AllowList) LocalPatterns() []string {
	var out []string
	for _, p := range l.allowed {
		if p.Name == "" && p.Prefix.IsValid() && (isLocal(p.Prefix.Addr()) || isLocal(p.Prefix.Masked().Addr())) {
			out = append(out, p.Raw)
		}
	}
	return out
}

// allowListJSON is an AllowList's encoding, part of the policy's
// ([Policy.MarshalBinary]): the patterns as written, which decoding
// parses again, so that a decoded list is one the parser made.
type allowListJSON struct {
	Allowed, Denied []string
	AllowLocal, Off bool
}

// MarshalJSON encodes l as its patterns as written and its two flags.
func (l *AllowList) MarshalJSON() ([]byte, error) {
	return json.Marshal(allowListJSON{Allowed: rawPatterns(l.allowed), Denied: rawPatterns(l.denied), AllowLocal: l.allowLocal, Off: l.off})
}

// UnmarshalJSON is the inverse of [AllowList.MarshalJSON]; it refuses
// unknown fields and malformed patterns.
func (l *AllowList) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j allowListJSON
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("allow-list: %w", err)
	}
	if dec.More() {
		return errors.New("allow-list: trailing data")
	}
	parsed, err := parseAllowList(j.Allowed, "allow-list: allowed", j.Denied, "allow-list: denied", j.AllowLocal)
	if err != nil {
		return err
	}
	parsed.off = j.Off
	*l = *parsed
	return nil
}

// Reasons for refusals, as printed in the run report and on stderr.
const (
	ReasonNotAllowed = "not in allowed_domains"
	ReasonDenied     = "in denied_domains"
	// ReasonNetworkOff is every refusal of a sandbox without network:
	// its proxy's, its name server's, its connects'.
	ReasonNetworkOff = "network off"
)

// Decision is an [AllowList]'s answer about one requested destination.
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
// must look up and pass through [AllowList.Admit].
func (d Decision) Resolve() bool { return d.Allow && !d.Addr.IsValid() }

// Decide is the policy decision for a request to host:port, made before any
// look-up. host is what the client sent: a name (any case, maybe with one
// trailing dot, maybe in Unicode), an IPv4 or IPv6 literal (brackets
// allowed), or a numeric form a resolver would read as IPv4. A denied name
// is never resolved, so a refused request leaks nothing through DNS.
func (l *AllowList) Decide(host string, port uint16) Decision {
	d := l.decide(host, port)
	if l.off && (d.Allow || d.Reason == ReasonNotAllowed || d.Reason == ReasonDenied) {
		d.Allow, d.Reason = false, ReasonNetworkOff
	}
	return d
}

func (l *AllowList) decide(host string, port uint16) Decision {
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
		case l.matchAddr(l.denied, addr, port):
			d.Reason = ReasonDenied
		case l.matchAddr(l.allowed, addr, port):
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
	case matchName(l.denied, name, port):
		d.Reason = ReasonDenied
	case matchName(l.allowed, name, port):
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
func (l *AllowList) Admit(port uint16, addrs []netip.Addr) ([]netip.Addr, string) {
	if len(addrs) == 0 {
		return nil, "name has no address"
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		switch {
		case l.matchAddr(l.denied, a, port):
			return nil, fmt.Sprintf("resolves to %s, %s", a, ReasonDenied)
		case isLocal(a) && !l.allowLocal && !l.matchAddr(l.allowed, a, port):
			return nil, fmt.Sprintf("resolves to local address %s (allow_local_binding is off)", a)
		}
		out = append(out, a)
	}
	return out, ""
}

func matchName(ps []pattern, name string, port uint16) bool {
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

func (l *AllowList) matchAddr(ps []pattern, a netip.Addr, port uint16) bool {
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

// isLocal reports whether a is loopback, private, link-local, CGNAT,
// multicast, unspecified or otherwise not a public unicast address,
// looking through the IPv6 forms that embed an IPv4 address.
func isLocal(a netip.Addr) bool {
	a = a.WithZone("")
	if a.Is6() {
		b := a.As16()
		switch {
		case mapped.Contains(a), nat64.Contains(a), mapped2.Contains(a):
			return isLocal(netip.AddrFrom4([4]byte(b[12:16])))
		case sixto4.Contains(a):
			if isLocal(netip.AddrFrom4([4]byte(b[2:6]))) {
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

// parseAllowList parses allow and deny lists. Each error names the list
// (allowedKey or deniedKey, such as "Options.AllowDomains" or
// "network.allowed_domains in /x/config.toml") and the value; every
// malformed pattern is named, not only the first, so that one run (or
// `agentbox doctor`) shows all that needs fixing.
func parseAllowList(allowed []string, allowedKey string, denied []string, deniedKey string, allowLocal bool) (*AllowList, error) {
	var errs []error
	parse := func(list []string, key string) []pattern {
		var out []pattern
		for _, s := range list {
			p, err := parsePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
				continue
			}
			out = append(out, p)
		}
		return out
	}
	l := &AllowList{allowed: parse(allowed, allowedKey), denied: parse(denied, deniedKey), allowLocal: allowLocal}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return l, nil
}

// DecideName is the name server's decision about a look-up of name,
// made before any port is known: allowed when some allow pattern admits
// the name on some port and no deny pattern refuses it on every port
// (a pattern with a port leaves the other ports to the proxy, which
// decides each connection). Host is the canonical name. Addresses and
// malformed names are refused.
func (l *AllowList) DecideName(name string) Decision {
	shown := displayHost(name)
	if l.off {
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
	case matchName(portless(l.denied), canon, 0):
		d.Reason = ReasonDenied
	case matchAnyPort(l.allowed, canon):
		d.Allow = true
	default:
		d.Reason = ReasonNotAllowed
	}
	return d
}

// portless are the patterns of ps that hold for every port.
func portless(ps []pattern) []pattern {
	var out []pattern
	for _, p := range ps {
		if p.Port == 0 {
			out = append(out, p)
		}
	}
	return out
}

func matchAnyPort(ps []pattern, name string) bool {
	for _, p := range ps {
		if matchName([]pattern{p}, name, p.Port) {
			return true
		}
	}
	return false
}

// AllowedPrefixes are the ranges of the allow list's address patterns
// (any port): the bare addresses a transparent connection may be carried
// to, for the proxy to decide with its port.
func (l *AllowList) AllowedPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range l.allowed {
		if p.Name == "" && p.Prefix.IsValid() {
			out = append(out, p.Prefix)
		}
	}
	return out
}

// pattern is one parsed entry of allowed_domains or denied_domains.
type pattern struct {
	// Raw is the entry as written, for messages.
	Raw string
	// Name is the ASCII, lower-case host name without a trailing dot;
	// empty for address patterns.
	Name string
	// Wildcard means "*.Name": any name strictly below Name.
	Wildcard bool
	// Prefix is the address range of an IP or CIDR pattern (an IP is a
	// full-length prefix); invalid for name patterns.
	Prefix netip.Prefix
	// Port limits the pattern to one port; 0 means every port.
	Port uint16
}

// idnaProfile converts names to their ASCII form with the checks a
// resolver applies to look-ups (no disallowed code points, valid labels).
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.StrictDomainName(false), // underscores occur in real names
	idna.Transitional(false),
)

// parsePattern parses one pattern. The error says what is wrong with it;
// callers prefix the key or flag it came from.
func parsePattern(s string) (pattern, error) {
	p := pattern{Raw: s}
	switch {
	case s == "":
		return p, errors.New("empty pattern")
	case strings.ContainsAny(s, " \t\r\n\x00"):
		return p, fmt.Errorf("%q contains white space or a NUL byte", s)
	case !utf8.ValidString(s):
		// A name is compared in its punycode form, which bytes that
		// are not UTF-8 do not have.
		return p, fmt.Errorf("%q is not valid UTF-8", s)
	case strings.Contains(s, "://"):
		return p, fmt.Errorf("%q has a scheme: write the host alone (example.com or example.com:443)", s)
	}
	// A CIDR: address/bits.
	if addr, _, ok := strings.Cut(s, "/"); ok {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return p, fmt.Errorf("%q has a path: write the host alone (a \"/\" is only valid in a CIDR such as 192.168.0.0/16)", s)
		}
		if a.Zone() != "" {
			return p, fmt.Errorf("%q: a CIDR cannot have a zone", s)
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("%q is not a valid CIDR: %v", s, err)
		}
		if pfx.Masked() != pfx {
			return p, fmt.Errorf("%q has host bits set (did you mean %s?)", s, pfx.Masked())
		}
		p.Prefix = unmapPrefix(pfx)
		return p, nil
	}
	if strings.ContainsAny(s, "?#@[]") && !strings.HasPrefix(s, "[") {
		return p, fmt.Errorf("%q is not a host name, address or CIDR", s)
	}
	host, port := s, ""
	// Bracketed IPv6 with a port, "[::1]:443", or a bare IPv6 literal.
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return p, fmt.Errorf("%q: missing ]", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return p, fmt.Errorf("%q: unexpected %q after ]", s, rest)
			}
			port = rest[1:]
			if port == "" {
				return p, fmt.Errorf("%q: empty port", s)
			}
		}
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return p, fmt.Errorf("%q: brackets hold only an IPv6 address", s)
		}
	case strings.Count(s, ":") > 1:
		// A bare IPv6 address; a port needs brackets.
	default:
		if h, pt, ok := strings.Cut(s, ":"); ok {
			host, port = h, pt
			if port == "" {
				return p, fmt.Errorf("%q: empty port", s)
			}
		}
	}
	if port != "" {
		n, err := parsePort(port)
		if err != nil {
			return p, fmt.Errorf("%q: %v", s, err)
		}
		p.Port = n
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return p, fmt.Errorf("%q: an address with a zone cannot be listed", s)
		}
		a = a.Unmap()
		p.Prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	if strings.Contains(host, ":") {
		return p, fmt.Errorf("%q is not a valid IPv6 address", s)
	}
	if strings.HasPrefix(host, "*") {
		if !strings.HasPrefix(host, "*.") || len(host) == 2 {
			return p, fmt.Errorf("%q: a wildcard is written *.example.com", s)
		}
		p.Wildcard = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return p, fmt.Errorf("%q: \"*\" is only allowed as the whole first label (*.example.com)", s)
	}
	// A pattern spelled as a number (127.1, 0x7f.0.0.1) would read as an
	// address to one tool and as a name to another: ask for the plain
	// dotted form.
	if endsInNumber(host) {
		if a, ok := parseIPv4Loose(strings.TrimSuffix(host, ".")); ok {
			return p, fmt.Errorf("%q is an address written unusually: write %s", s, a)
		}
		return p, fmt.Errorf("%q is neither a host name nor an address", s)
	}
	name, err := canonicalName(host)
	if err != nil {
		return p, fmt.Errorf("%q: %v", s, err)
	}
	p.Name = name
	return p, nil
}

func parsePort(s string) (uint16, error) {
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port %q is not a number", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range (1-65535)", s)
	}
	return uint16(n), nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// canonicalName returns the ASCII lower-case form of a host name, without
// one trailing dot, or an error when it is not hostname syntax.
func canonicalName(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", errors.New("empty host name")
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		a, err := idnaProfile.ToASCII(h)
		if err != nil {
			return "", fmt.Errorf("not a valid international domain name: %v", err)
		}
		h = a
	}
	h = strings.ToLower(h)
	if len(h) > 253 {
		return "", errors.New("host name longer than 253 bytes")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return "", errors.New("empty label")
		}
		if len(label) > 63 {
			return "", errors.New("label longer than 63 bytes")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("label %q starts or ends with a hyphen", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("byte %q is not allowed in a host name", c)
			}
		}
		// A punycode label must decode, or two tools could disagree
		// on what name it is.
		if strings.HasPrefix(label, "xn--") {
			if _, err := idna.Punycode.ToUnicode(label); err != nil {
				return "", fmt.Errorf("label %q is not valid punycode", label)
			}
		}
	}
	return h, nil
}

// endsInNumber is the WHATWG URL rule for "this host is an IPv4 address":
// its last label (after one trailing dot) is all decimal digits, or 0x
// followed by hex digits. Such a host is never looked up as a name.
func endsInNumber(h string) bool {
	h = strings.TrimSuffix(h, ".")
	last := h[strings.LastIndex(h, ".")+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		for _, c := range last[2:] {
			if !isHex(c) {
				return false
			}
		}
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isHex(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseIPv4Loose parses the forms inet_aton(3) accepts: one to four parts,
// each decimal, octal (leading 0) or hexadecimal (0x), the last part
// filling the remaining bytes. "2130706433", "0177.0.0.1", "0x7f.1" and
// "127.1" are all 127.0.0.1.
func parseIPv4Loose(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, s := range parts {
		base := 10
		switch {
		case s == "":
			return netip.Addr{}, false
		case len(s) > 1 && (s[:2] == "0x" || s[:2] == "0X"):
			base, s = 16, s[2:]
			if s == "" {
				s = "0" // inet_aton accepts "0x" as zero
			}
		case len(s) > 1 && s[0] == '0':
			base, s = 8, s[1:]
		}
		v, err := strconv.ParseUint(s, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var ip uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		ip |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}
