package policy

import (
	"errors"
	"fmt"
)

// NetworkSection is [network]: allow-listed egress through agentbox's
// proxy.
type NetworkSection struct {
	// AllowedDomains are "name", "*.suffix", "name:port", IP and CIDR
	// patterns; non-empty turns on allow-listed egress.
	AllowedDomains []string `toml:"allowed_domains"`
	// DeniedDomains are patterns refused even when allowed.
	DeniedDomains []string `toml:"denied_domains"`
	// AllowLocalBinding admits allowed names that resolve to loopback,
	// private or link-local addresses.
	AllowLocalBinding *bool `toml:"allow_local_binding"`
	// Publish are ports of the command offered on the host's 127.0.0.1:
	// integers (3000) or strings ("3000", "8080:3000"); see [PortMap].
	Publish []any `toml:"publish"`
	// HostPorts are the host loopback ports the command may reach.
	HostPorts []any `toml:"host_ports"`
}

func (n *NetworkSection) validate(path string) error {
	if _, err := parseAllowList(n.AllowedDomains, n.key(path, "allowed_domains"), n.DeniedDomains, n.key(path, "denied_domains"), false); err != nil {
		return err
	}
	return n.validatePorts(path)
}

func (n *NetworkSection) key(path, k string) string {
	if path == "" {
		return "network." + k
	}
	return fmt.Sprintf("config %s: key network.%s", path, k)
}

// resolveEgress sets the egress rules from Options.AllowDomains and
// [network]. An allow-list with the network otherwise off means
// allow-listed egress; with the network on (Options.Network,
// network_access = true or danger-full-access) it could not be enforced,
// so it is an error naming both.
func (p *Policy) resolveEgress(o Options, cfg *Config) error {
	n := cfg.Network
	allowed := append(append([]string{}, n.AllowedDomains...), o.AllowDomains...)
	if len(allowed) == 0 {
		if len(n.DeniedDomains) > 0 && p.f.Network {
			return fmt.Errorf("%s is set but the network is fully on (%s): nothing would be refused; remove one of them", n.key(cfg.Path, "denied_domains"), networkSource(o, cfg, p))
		}
		return nil
	}
	source := "Options.AllowDomains"
	if len(n.AllowedDomains) > 0 {
		source = n.key(cfg.Path, "allowed_domains")
		if len(o.AllowDomains) > 0 {
			source += " and Options.AllowDomains"
		}
	}
	if p.f.Network {
		return fmt.Errorf("%s together with an allow-list (%s): the allow-list only works with the network otherwise off; remove one of them", networkSource(o, cfg, p), source)
	}
	local := n.AllowLocalBinding != nil && *n.AllowLocalBinding
	var errs []error
	rules, err := parseAllowList(n.AllowedDomains, n.key(cfg.Path, "allowed_domains"), n.DeniedDomains, n.key(cfg.Path, "denied_domains"), local)
	errs = append(errs, err)
	flags, err := parseAllowList(o.AllowDomains, "Options.AllowDomains", nil, "", local)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rules.allowed = append(rules.allowed, flags.allowed...)
	p.f.Egress = rules
	return nil
}

// networkSource names what turned the network fully on.
func networkSource(o Options, cfg *Config, p *Policy) string {
	switch {
	case p.f.Mode == DangerFullAccess:
		return "sandbox mode danger-full-access"
	case o.Network != nil && *o.Network:
		return "Options.Network"
	case cfg.SandboxWorkspaceWrite.NetworkAccess != nil && *cfg.SandboxWorkspaceWrite.NetworkAccess:
		if cfg.Path != "" {
			return fmt.Sprintf("network_access = true in %s", cfg.Path)
		}
		return "network_access = true"
	}
	return "the network"
}
