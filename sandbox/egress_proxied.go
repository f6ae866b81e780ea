//go:build darwin || windows

package sandbox

import "github.com/agentbox/agentbox/internal/netproxy"

// proxied closes the allow-list proxy srv once the run has ended and puts
// its decisions in the report (backends whose own wait knows nothing of
// the proxy).
func (p *proc) proxied(srv *netproxy.Server) {
	p.cleanup.addErr(srv.Close)
	p.addReport(func(s *sections) { s.network = srv.Recorder().Report() })
}
