package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/darwin"
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/internal/toolcache"
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

// privateCaches creates the per-workspace cache directories the profile
// makes writable (macOS has no overlays: caches are private and start
// cold) and points the tools at them.
func privateCaches(pol *policy.Policy, env []string) ([]string, error) {
	for _, d := range toolcache.Decide(pol.ToolCacheInputs(), false) {
		if d.How != toolcache.Private {
			continue
		}
		if err := os.MkdirAll(toolcache.PrivateRoot(d.Cache), 0o700); err != nil {
			return nil, fmt.Errorf("tool cache %s: %w", d.Cache.Name, err)
		}
		for _, kv := range toolcache.Env(d, toolcache.PrivateDir(d.Cache), env) {
			env = setEnv(env, kv)
		}
	}
	return env, nil
}

// removeStateTree deletes root, a tree of agentbox's state directory
// that commands wrote (Go's module cache makes its directories read-only:
// they are made writable first; WalkDir follows no symlink), and returns
// it, or "" when there was nothing or it could not be removed.
func removeStateTree(root string) string {
	if _, err := os.Lstat(root); err != nil {
		return ""
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if os.RemoveAll(root) != nil {
		return ""
	}
	return root
}

// privateTemps creates the workspace's private temporary directories the
// profile makes writable and points TMPDIR at the one standing for
// $TMPDIR (or /tmp): Seatbelt cannot show it at the host's path. One
// inside another (a $TMPDIR under /tmp) is made through an os.Root of the
// outer one, which the command writes, so no link it planted is followed
// out of it.
func privateTemps(pol *policy.Policy, env []string) ([]string, error) {
	var own []string
	for _, t := range pol.PrivateTemps() {
		outer := ""
		for _, o := range own {
			if fspath.Within(t.Dir, o) {
				outer = o
			}
		}
		if outer == "" {
			if err := os.MkdirAll(t.Dir, 0o700); err != nil {
				return nil, fmt.Errorf("private temporary directory for %s: %w", t.Path, err)
			}
			own = append(own, t.Dir)
			continue
		}
		root, err := os.OpenRoot(outer)
		if err != nil {
			return nil, fmt.Errorf("private temporary directory for %s: %w", t.Path, err)
		}
		rel, _ := filepath.Rel(outer, t.Dir)
		err = root.MkdirAll(rel, 0o700)
		root.Close()
		if err != nil {
			return nil, fmt.Errorf("private temporary directory %s for $%s: %w (remove it, or run agentbox cleanup)", t.Dir, t.Env, err)
		}
	}
	if dir := pol.TempDirFor(); dir != "" {
		env = setEnv(env, "TMPDIR="+dir)
	}
	return env, nil
}
