package sandbox

import "github.com/agentbox/agentbox/policy"

// gitlinkProcess runs a policy.GitlinkGuard's check when the command has
// ended (the backends whose process type has no place for it).
type gitlinkProcess struct {
	process
	gl   *policy.GitlinkGuard
	diag func(format string, args ...any)
}

func (p *gitlinkProcess) Wait() (*Status, error) {
	st, err := p.process.Wait()
	for _, m := range p.gl.Check() {
		p.diag("%s", m)
	}
	return st, err
}
