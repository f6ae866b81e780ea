package spec

import (
	"errors"
	"fmt"
)

// Validate refuses a spec whose switches contradict each other, naming
// the field: the stage checks it before it builds anything, so that a
// host-side mistake fails the run instead of building a sandbox other
// than the one asked for.
func (s *Spec) Validate() error {
	var errs []error
	bad := func(field, why string) { errs = append(errs, fmt.Errorf("spec: %s %s", field, why)) }
	n := &s.Net
	if n.Network || s.Degraded.On {
		// Without a namespace of its own the sandbox's loopback is the
		// host's: nothing agentbox serves there would be the sandbox's.
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"Net.Proxy", n.Proxy}, {"Net.Resolver", n.Resolver}, {"Net.Transparent", n.Transparent},
			{"Net.HostPorts", len(n.HostPorts) > 0}, {"Net.Publish", n.Publish},
		} {
			if f.set {
				bad(f.name, "needs the sandbox's own network namespace (Net.Network and Degraded.On unset)")
			}
		}
	}
	if n.ProxyOff && !n.Proxy {
		bad("Net.ProxyOff", "needs Net.Proxy")
	}
	if n.Transparent && !n.Resolver {
		bad("Net.Transparent", "needs Net.Resolver")
	}
	if len(n.Carried) > 0 && !n.Transparent {
		bad("Net.Carried", "needs Net.Transparent")
	}
	if s.Walls.Files != nil && !s.Walls.MediateUnixConnect {
		bad("Walls.Files", "needs Walls.MediateUnixConnect")
	}
	if len(s.Degraded.ProxyAddrs) > 0 && !s.Degraded.On {
		bad("Degraded.ProxyAddrs", "needs Degraded.On")
	}
	if z := &s.Session; z.On {
		if s.Degraded.On {
			bad("Session.On", "cannot go with Degraded.On: sessions need user namespaces")
		}
		if s.Command.Pty != nil || len(s.Command.Reopen) > 0 {
			bad("Command.Pty and Command.Reopen", "are a lone run's: a session's commands bring their own streams")
		}
	} else if z.Init != "" || z.BindPerCommand || z.PortOwnersFD != 0 || len(z.ProxyAddrs) > 0 {
		bad("Session", "fields are set without Session.On")
	}
	return errors.Join(errs...)
}
