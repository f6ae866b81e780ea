package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

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
