//go:build linux || darwin || windows

package sandbox

import (
	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/policy"
)

// newGitlinkGuard is gitguard.New with this platform's file
// times (gitstamps_*.go), which the guard needs to make git distrust the
// index entries of files the command changed.
func newGitlinkGuard(pol *policy.Policy) *gitguard.Guard {
	g := gitguard.New(pol)
	if g != nil {
		g.Stamps = &gitguard.Stamps{ChangedSince: changedSince, Touch: touchNoFollow}
	}
	return g
}

// withGitlinkGuard wraps p so gl's check runs when the command has ended;
// gl nil leaves p as it is.
func withGitlinkGuard(p process, gl *gitguard.Guard, c *Cmd) process {
	if gl == nil {
		return p
	}
	return &gitlinkProcess{process: p, gl: gl, diag: c.diag}
}

// gitlinkProcess runs a gitguard.Guard's check when the command has
// ended (the backends whose process type has no place for it).
type gitlinkProcess struct {
	process
	gl   *gitguard.Guard
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
