package linux

import (
	"slices"

	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

// CachePlan turns decisions into init-stage steps ([toolcache.Plan]): the
// pins as Pin and PinLink mounts, ordered outermost first, the cache
// mounts, and the paths the Landlock layer must let the command write.
// layers maps a cache name to its prepared layer (see PrepareCaches); env
// is the command's environment.
func CachePlan(p *policy.Policy, ds []toolcache.Decision, layers map[string]toolcache.Layer, env []string) (pins []spec.Mount, mounts []spec.CacheMount, writable []string, err error) {
	ps, mounts, writable, err := toolcache.Plan(p.WritableRoots(), ds, layers, env)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, pin := range ps {
		kind := spec.Pin
		if pin.Link {
			kind = spec.PinLink
		}
		pins = append(pins, spec.Mount{Kind: kind, Path: pin.Path})
	}
	slices.SortFunc(pins, func(a, b spec.Mount) int { return byDepth(a.Path, b.Path) })
	return pins, mounts, writable, nil
}
