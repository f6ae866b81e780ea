package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PortMap is one published port ([network] publish, Options.Publish): a
// connection to the host's 127.0.0.1:Host is carried to the sandbox's
// 127.0.0.1:Inner, where the command listens.
type PortMap struct {
	Host  uint16 `json:"host"`
	Inner uint16 `json:"inner"`
}

// String is the mapping as written: "3000", or "8080:3000".
func (m PortMap) String() string {
	if m.Host == m.Inner {
		return strconv.Itoa(int(m.Host))
	}
	return fmt.Sprintf("%d:%d", m.Host, m.Inner)
}

// Publish are the command's ports offered on the host's 127.0.0.1 while
// it (or its session) runs, in the order given.
func (p *Policy) Publish() []PortMap { return slices.Clone(p.f.Publish) }

// HostPorts are the ports of the host's loopback (127.0.0.1 and ::1) the
// command may connect to, and no other, in the order given.
func (p *Policy) HostPorts() []uint16 { return slices.Clone(p.f.HostPorts) }

// ParsePort reads a TCP port as a decimal number from 1 to 65535, and
// nothing else: no name, no address, no range, no sign, no 0 (which
// would let the kernel choose a port).
func ParsePort(s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("empty port")
	}
	if len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a port number (a decimal number from 1 to 65535; no host, address, name or range)", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range (1 to 65535)", s)
	}
	return uint16(n), nil
}

// ParsePublish reads PORT or PORT:INNER (see [PortMap]). The host side
// is always 127.0.0.1, so no address may be given.
func ParsePublish(s string) (PortMap, error) {
	host, inner, two := strings.Cut(s, ":")
	if strings.Contains(inner, ":") || strings.ContainsAny(s, "[]") {
		return PortMap{}, fmt.Errorf("%q: want PORT or PORT:INNER (the host side is always 127.0.0.1; no address may be given)", s)
	}
	h, err := ParsePort(host)
	if err != nil {
		return PortMap{}, fmt.Errorf("%q: host port: %w", s, err)
	}
	if !two {
		return PortMap{Host: h, Inner: h}, nil
	}
	i, err := ParsePort(inner)
	if err != nil {
		return PortMap{}, fmt.Errorf("%q: inner port: %w", s, err)
	}
	return PortMap{Host: h, Inner: i}, nil
}

// configPort is one entry of publish or host_ports as TOML decoded it: an
// integer, or a string.
func configPort(v any) (string, error) {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10), nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("%v is a %T; want a port number or a string such as \"8080:3000\"", v, v)
}

// validatePorts checks [network] publish and host_ports on their own.
func (n *NetworkSection) validatePorts(path string) error {
	_, err := n.publish(path)
	if err != nil {
		return err
	}
	_, err = n.hostPorts(path)
	return err
}

func (n *NetworkSection) publish(path string) ([]sourced[PortMap], error) {
	return configPorts(n.Publish, n.key(path, "publish"), ParsePublish)
}

func (n *NetworkSection) hostPorts(path string) ([]sourced[uint16], error) {
	return configPorts(n.HostPorts, n.key(path, "host_ports"), ParsePort)
}

// configPorts parses the entries of the config's key with parse.
func configPorts[T any](vs []any, key string, parse func(string) (T, error)) ([]sourced[T], error) {
	var out []sourced[T]
	for _, v := range vs {
		s, err := configPort(v)
		if err == nil {
			var p T
			if p, err = parse(s); err == nil {
				out = append(out, sourced[T]{p, key})
				continue
			}
		}
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return out, nil
}

// maxPorts bounds the published ports and the host ports of a policy.
const maxPorts = 64

// sourced is a value and the key or option it came from, for messages.
type sourced[T any] struct {
	v      T
	source string
}

// resolvePorts sets the published and host ports from [network] and
// Options. A host port may be published once; a port cannot be both a
// host port and published (inside, it would be bound twice; outside, the
// command would reach its own published port); and neither makes sense
// with the network fully on, where the command shares the host's
// loopback.
func (p *Policy) resolvePorts(o Options, cfg *Config) error {
	pub, err := cfg.Network.publish(cfg.Path)
	if err != nil {
		return err
	}
	for _, s := range o.Publish {
		m, err := ParsePublish(s)
		if err != nil {
			return fmt.Errorf("Options.Publish: %w", err)
		}
		pub = append(pub, sourced[PortMap]{m, "Options.Publish"})
	}
	hp, err := cfg.Network.hostPorts(cfg.Path)
	if err != nil {
		return err
	}
	for _, s := range o.HostPorts {
		n, err := ParsePort(s)
		if err != nil {
			return fmt.Errorf("Options.HostPorts: %w", err)
		}
		hp = append(hp, sourced[uint16]{n, "Options.HostPorts"})
	}
	if len(pub) == 0 && len(hp) == 0 {
		return nil
	}
	// A host port's two listeners travel in one message of at most 253
	// descriptors (the kernel's SCM_MAX_FD); nobody needs more.
	if len(pub) > maxPorts || len(hp) > maxPorts {
		return fmt.Errorf("%d published ports and %d host ports: at most %d of each", len(pub), len(hp), maxPorts)
	}
	if p.f.Network {
		src := "Options.Publish"
		if len(pub) > 0 {
			src = pub[0].source
		} else {
			src = hp[0].source
		}
		return fmt.Errorf("%s with the network fully on (%s): the command shares the host's loopback, so there is nothing to carry; remove one of them", src, networkSource(o, cfg, p))
	}
	hostSeen := map[uint16]string{}
	innerSeen := map[uint16]string{}
	for _, m := range pub {
		if s, dup := hostSeen[m.v.Host]; dup {
			return fmt.Errorf("%s: host port %d is published twice (also in %s)", m.source, m.v.Host, s)
		}
		hostSeen[m.v.Host] = m.source
		innerSeen[m.v.Inner] = m.source
		p.f.Publish = append(p.f.Publish, m.v)
	}
	seen := map[uint16]string{}
	for _, h := range hp {
		if s, dup := seen[h.v]; dup {
			return fmt.Errorf("%s: host port %d is listed twice (also in %s)", h.source, h.v, s)
		}
		seen[h.v] = h.source
		if s, ok := hostSeen[h.v]; ok {
			return fmt.Errorf("%s: port %d is also published (%s): the command would reach its own published port; remove one of them", h.source, h.v, s)
		}
		if s, ok := innerSeen[h.v]; ok {
			return fmt.Errorf("%s: port %d is also a published inner port (%s): inside the sandbox it cannot be both the command's listener and the way to the host's port; remove one of them", h.source, h.v, s)
		}
		p.f.HostPorts = append(p.f.HostPorts, h.v)
	}
	return nil
}
