package linux

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"
)

// GitDir is a missing read-only git directory that gets a placeholder for
// the run, inside the git directory GitDir.
type GitDir struct {
	Path, GitDir string
}

// GitFile is a missing read-only git file that gets a placeholder for
// the run (see [gitguard.ReadOnly.Placeholder]).
type GitFile struct {
	Path    string
	Content string
}

// GitWritesPlan rewrites a mount plan for allow_git_writes: each .git
// directory inside a writable root is pinned instead of bound read-only
// (so it can be written but not renamed or replaced), and its
// [gitguard.ReadOnlyPaths] are bound read-only over it, with the
// directories between them and the .git directory pinned. It returns the
// new plan and the missing directories and files that need placeholders
// (a mount needs something to mount on).
func GitWritesPlan(p *policy.Policy, mounts []spec.Mount) (out []spec.Mount, dirs []GitDir, files []GitFile, err error) {
	gitdirs := map[string]bool{}
	for _, pr := range p.Protected() {
		if gitguard.WritableDir(pr) {
			gitdirs[pr.Path] = true
		}
	}
	for _, m := range mounts {
		if m.Kind == spec.BindReadOnly && gitdirs[m.Path] {
			m.Kind = spec.Pin
		}
		out = append(out, m)
	}
	var pins, ro []string
	pinned := map[string]bool{}
	for _, gd := range slices.Sorted(maps.Keys(gitdirs)) {
		cs, err := gitguard.Carveouts(gd)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("allow_git_writes: %w (keep .git read-only, or make it a directory)", err)
		}
		for _, c := range cs {
			ro = append(ro, c.Path)
			for a := filepath.Dir(c.Path); a != gd && fspath.Within(a, gd); a = filepath.Dir(a) {
				if !pinned[a] {
					pinned[a] = true
					pins = append(pins, a)
				}
			}
			switch {
			case c.Exists:
			case c.Dir:
				dirs = append(dirs, GitDir{c.Path, gd})
			default:
				files = append(files, GitFile{c.Path, c.Placeholder})
			}
		}
	}
	out = appendByDepth(out, spec.Pin, pins)
	out = appendByDepth(out, spec.BindReadOnly, ro)
	return out, dirs, files, nil
}
