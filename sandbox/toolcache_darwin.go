package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/cacheplan"
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

// privateCaches creates the per-workspace cache directories the profile
// makes writable (macOS has no overlays: caches are private and start
// cold) and points the tools at them.
func privateCaches(pol *policy.Policy, env []string) ([]string, error) {
	for _, d := range cacheplan.Decide(pol, false) {
		if d.How != cacheplan.Private {
			continue
		}
		if err := os.MkdirAll(cacheplan.PrivateRoot(d.Cache), 0o700); err != nil {
			return nil, fmt.Errorf("tool cache %s: %w", d.Cache.Name, err)
		}
		for _, kv := range cacheplan.Env(d, cacheplan.PrivateDir(d.Cache), env) {
			name, _, _ := strings.Cut(kv, "=")
			out := env[:0:0]
			for _, e := range env {
				if k, _, _ := strings.Cut(e, "="); k != name {
					out = append(out, e)
				}
			}
			env = append(out, kv)
		}
	}
	return env, nil
}

// removeCacheLayers deletes the per-workspace cache directories (Go's
// module cache makes its directories read-only: make them writable
// first) and returns what it removed, or "".
func removeCacheLayers(state string) string {
	if state == "" {
		return ""
	}
	root := agentdirs.ToolCacheRoot(state)
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
