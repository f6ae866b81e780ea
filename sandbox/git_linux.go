package sandbox

import (
	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"
)

// applyGitWrites opens the policy's .git directories for writing when
// allow_git_writes is set, keeping what makes git run a program or read
// another repository read-only (gitguard.ReadOnlyPaths). It returns the
// placeholders to release when the run ends (nil when the option is off),
// and what they were made for, which a session holds again for each
// command (gitHolds.hold). With a pool, placeholders come from it and go
// back to it.
func applyGitWrites(pol *policy.Policy, sp *spec.Spec, state string, pool *linux.Pool) (*linux.GitHeld, gitHolds, error) {
	if !pol.AllowGitWrites() || pol.Mode() != policy.WorkspaceWrite {
		return nil, gitHolds{}, nil
	}
	mounts, dirs, files, err := linux.GitWritesPlan(pol, sp.FS.Mounts)
	if err != nil {
		return nil, gitHolds{}, err
	}
	sp.FS.Mounts = mounts
	gh := gitHolds{dirs, files}
	held, err := gh.hold(state, pool)
	if err != nil {
		return nil, gitHolds{}, err
	}
	// A placeholder held at an ancestor (another run's placeholder stood
	// in the way) is what gets bound read-only.
	at := held.DirPaths()
	for i, d := range dirs {
		if i < len(at) && at[i] != d.Path {
			for j, m := range mounts {
				if m.Kind == spec.BindReadOnly && m.Path == d.Path {
					mounts[j].Path = at[i]
				}
			}
		}
	}
	return held, gh, nil
}

// gitHolds are the missing read-only paths of allow_git_writes that get a
// placeholder for each run.
type gitHolds struct {
	dirs  []linux.GitDir
	files []linux.GitFile
}

// hold holds them, the directories from pool (nil: made and removed).
func (g gitHolds) hold(state string, pool *linux.Pool) (*linux.GitHeld, error) {
	if len(g.dirs) == 0 && len(g.files) == 0 {
		return nil, nil
	}
	return linux.HoldGitPlaceholders(g.dirs, g.files, state, pool)
}
