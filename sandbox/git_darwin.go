package sandbox

import (
	"github.com/agentbox/agentbox/internal/darwin"
	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/policy"
)

// addGitWrites opens the policy's .git directories in the profile when
// allow_git_writes is set, minus gitguard.ReadOnlyPaths. A git directory
// whose read-only paths cannot be resolved (one is a symlink) stays
// read-only as a whole.
func addGitWrites(in *darwin.Input, pol *policy.Policy) {
	if !pol.AllowGitWrites() {
		return
	}
	for _, pr := range pol.Protected() {
		if !gitguard.WritableDir(pr) {
			continue
		}
		cs, err := gitguard.Carveouts(pr.Path)
		if err != nil {
			continue
		}
		in.GitWritable = append(in.GitWritable, pr.Path)
		for _, c := range cs {
			in.GitReadOnly = append(in.GitReadOnly, c.Path)
		}
	}
}
