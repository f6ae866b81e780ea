package sandbox

import (
	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

// applyCaches places the policy's tool caches for one run: it prepares
// their per-workspace layers and adds to sp the mounts (overlays when
// overlays is true, that is in a user namespace), the paths Landlock must
// let the command write, and the variables that point tools at private
// directories. The caller releases the layers when the run ends.
func applyCaches(pol *policy.Policy, sp *spec.Spec, overlays bool) (*linux.CacheLayers, error) {
	ds := toolcache.Decide(pol.ToolCacheInputs(), overlays)
	cl, err := linux.PrepareCaches(ds)
	if err != nil {
		return nil, err
	}
	pins, mounts, writable, err := linux.CachePlan(pol, ds, cl.Layers, sp.Command.Env)
	if err != nil {
		cl.Release()
		return nil, err
	}
	if overlays {
		sp.FS.Mounts = append(append([]spec.Mount{}, sp.FS.Mounts...), pins...)
		sp.FS.Caches = mounts
	}
	sp.Walls.WritableRoots = append(append([]string{}, sp.Walls.WritableRoots...), writable...)
	if sp.Walls.Files != nil {
		// The caches are writable too (overlays, private directories):
		// the file observer must not call their writes refused.
		r := *sp.Walls.Files
		r.Writable = append(append([]string{}, r.Writable...), writable...)
		for _, m := range mounts {
			r.Writable = append(r.Writable, m.Target)
		}
		sp.Walls.Files = &r
	}
	env := sp.Command.Env
	for _, d := range ds {
		for _, kv := range toolcache.Env(d, cl.Layers[d.Cache.Name].Private, env) {
			env = setEnv(env, kv)
		}
	}
	sp.Command.Env = env
	return cl, nil
}
