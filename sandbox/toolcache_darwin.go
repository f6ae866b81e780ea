package sandbox

import (
	"fmt"
	"os"

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
