package spec

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/fsreport"
)

func TestValidate(t *testing.T) {
	lone := Spec{Walls: Walls{MediateUnixConnect: true, Files: &fsreport.Rules{}},
		Net: Net{Proxy: true, ProxyOff: true, Resolver: true, HostPorts: []uint16{80}, Publish: true}}
	if err := lone.Validate(); err != nil {
		t.Errorf("a network-off lone run refused: %v", err)
	}
	for field, edit := range map[string]func(*Spec){
		"Net.Proxy":           func(s *Spec) { s.Net.Network = true },
		"Net.HostPorts":       func(s *Spec) { s.Degraded.On = true },
		"Net.ProxyOff":        func(s *Spec) { s.Net.Proxy = false },
		"Net.Transparent":     func(s *Spec) { s.Net.Resolver, s.Net.Transparent = false, true },
		"Net.Carried":         func(s *Spec) { s.Net.Carried = make([]netip.Prefix, 1) },
		"Walls.Files":         func(s *Spec) { s.Walls.MediateUnixConnect = false },
		"Degraded.ProxyAddrs": func(s *Spec) { s.Degraded.ProxyAddrs = []string{"127.0.0.1:1"} },
		"Session.On":          func(s *Spec) { s.Session.On, s.Degraded.On = true, true },
		"Command.Pty":         func(s *Spec) { s.Session.On, s.Command.Pty = true, &PtySpec{} },
		"Session":             func(s *Spec) { s.Session.Init = "/agentbox" },
	} {
		s := lone
		edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want an error naming it", field, err)
		}
	}
}
