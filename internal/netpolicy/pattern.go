// Package netpolicy decides which network destinations a sandboxed command
// may reach through agentbox's proxy: it parses the allow and deny patterns
// of [network] allowed_domains and denied_domains, and holds the decision
// in one pure function ([Rules.Decide], completed by [Rules.Admit] once a
// name has been resolved), so that every proxy front end (HTTP, SOCKS5, on
// every platform) asks the same question and gets the same answer.
//
// # Matching
//
// Names are compared case-insensitively, in their ASCII (punycode) form,
// after removing one trailing dot. "example.com" matches only that name;
// "*.example.com" matches its subdomains and not example.com itself;
// "name:port" limits the port. IP literals and CIDRs match addresses. A deny
// pattern wins over every allow pattern. A request for a bare address is
// allowed only when that address (or a CIDR holding it) is listed; numeric
// spellings a resolver would accept (2130706433, 0177.0.0.1, 0x7f.1,
// IPv4-mapped IPv6) are the address they denote.
//
// # Local destinations
//
// An allowed name is resolved once; every address it resolves to must pass
// [Rules.Admit]: loopback, private, link-local, CGNAT, multicast and
// unspecified addresses are refused unless AllowLocal is set or the address
// is itself listed. The proxy then connects to exactly the admitted address.
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Pattern is one parsed entry of allowed_domains or denied_domains.
type Pattern struct {
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

// ParsePattern parses one pattern. The error says what is wrong with it;
// callers prefix the key or flag it came from.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{Raw: s}
	switch {
	case s == "":
		return p, errors.New("empty pattern")
	case strings.ContainsAny(s, " \t\r\n\x00"):
		return p, fmt.Errorf("%q contains white space or a NUL byte", s)
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
