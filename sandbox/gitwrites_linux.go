package sandbox

import (
	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/policy"
)

// applyGitWrites opens the policy's .git directories for writing when
// allow_git_writes is set, keeping what makes git run a program or read
// another repository read-only (gitguard.ReadOnlyPaths). It returns the
// placeholders to release when the run ends (nil when the option is off).
func applyGitWrites(pol *policy.Policy, spec *linux.Spec, state string) (*linux.GitHeld, error) {
	if !pol.AllowGitWrites() || pol.Mode() != policy.WorkspaceWrite {
		return nil, nil
	}
	mounts, dirs, files, err := linux.GitWritesPlan(pol, spec.Mounts)
	if err != nil {
		return nil, err
	}
	held, err := linux.HoldGitPlaceholders(dirs, files, state)
	if err != nil {
		return nil, err
	}
	// A placeholder held at an ancestor (another run's placeholder stood
	// in the way) is what gets bound read-only.
	at := held.DirPaths()
	for i, d := range dirs {
		if i < len(at) && at[i] != d.Path {
			for j, m := range mounts {
				if m.Kind == linux.BindReadOnly && m.Path == d.Path {
					mounts[j].Path = at[i]
				}
			}
		}
	}
	spec.Mounts = mounts
	return held, nil
}
