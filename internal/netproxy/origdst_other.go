//go:build !linux

package netproxy

import (
	"net"
	"net/netip"
)

// originalDst: transparent networking is Linux's only.
func originalDst(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errNotRedirected }
