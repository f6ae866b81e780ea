package sandbox

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/agentbox/agentbox/policy"
)

// NetworkPublished is one published port of the "network" section's
// "published" list: how many connections the host's 127.0.0.1:HostPort
// carried to the command's 127.0.0.1:Port.
type NetworkPublished struct {
	HostPort uint16 `json:"host_port"`
	Port     uint16 `json:"port"`
	Count    int    `json:"count"`
}

// portsNames names the policy's ports options for messages.
const (
	publishNames   = "published ports (Options.Publish, [network] publish)"
	hostPortsNames = "host ports (Options.HostPorts, [network] host_ports)"
)

// checkPorts refuses published ports and host ports where no backend
// carries them: only Linux's network namespace does.
func checkPorts(pol *policy.Policy) error {
	if runtime.GOOS == "linux" {
		return nil
	}
	if len(pol.Publish()) > 0 {
		return fmt.Errorf("%s are not available on %s: %w", publishNames, runtime.GOOS, ErrUnsupported)
	}
	if len(pol.HostPorts()) > 0 {
		return fmt.Errorf("%s are not available on %s: %w", hostPortsNames, runtime.GOOS, ErrUnsupported)
	}
	return nil
}

// publishCounter counts a run's connections per published port.
type publishCounter struct {
	mu sync.Mutex
	n  map[policy.PortMap]int
}

func (c *publishCounter) add(m policy.PortMap) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[policy.PortMap]int{}
	}
	c.n[m]++
}

// report is the counts, by host port.
func (c *publishCounter) report() []NetworkPublished {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []NetworkPublished
	for m, n := range c.n {
		out = append(out, NetworkPublished{HostPort: m.Host, Port: m.Inner, Count: n})
	}
	slices.SortFunc(out, func(a, b NetworkPublished) int { return int(a.HostPort) - int(b.HostPort) })
	return out
}
