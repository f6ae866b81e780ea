package sandbox

import (
	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/policy"
)

// newGitlinkGuard is policy.NewGitlinkGuard with this platform's file
// times (gitstamps_*.go), which the guard needs to make git distrust the
// index entries of files the command changed.
func newGitlinkGuard(pol *policy.Policy) *policy.GitlinkGuard {
	g := policy.NewGitlinkGuard(pol)
	if g != nil {
		g.Stamps = &policy.GitStamps{ChangedSince: changedSince, Touch: touchNoFollow}
	}
	return g
}

// withGitlinkGuard wraps p so gl's check runs when the command has ended;
// gl nil leaves p as it is.
func withGitlinkGuard(p process, gl *policy.GitlinkGuard, c *Cmd) process {
	if gl == nil {
		return p
	}
	return &gitlinkProcess{process: p, gl: gl, diag: c.diag}
}

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

// networkReport passes on the wrapped process's, so that a command's run
// report keeps its network section under allow_git_writes.
func (p *gitlinkProcess) networkReport() netpolicy.Report {
	if r, ok := p.process.(networkReporter); ok {
		return r.networkReport()
	}
	return netpolicy.Report{}
}
