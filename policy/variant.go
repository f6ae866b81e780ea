package policy

import (
	"slices"

	"github.com/agentbox/agentbox/internal/toolcache"
)

// The variants below are for agentbox's own probes and planners, which
// need the sandbox of a resolved policy with one thing changed. Unlike
// Resolve they derive nothing again and read nothing (no config, no
// environment, no file system): the caller knows what it changes.
// Each returns a copy; p itself is unchanged.

// ReadOnlyAt is a read-only policy with workspace cwd and nothing else
// set: what agentbox's doctor and setup probe a machine with when they
// are given no policy.
func ReadOnlyAt(cwd string) *Policy { return &Policy{f: fields{Mode: ReadOnly, Cwd: cwd}} }

// WithAllowDegraded is p with [Policy.AllowDegraded] set to on.
func (p *Policy) WithAllowDegraded(on bool) *Policy {
	q := p.clone()
	q.f.AllowDegraded = on
	return q
}

// WithoutWrites is p in [ReadOnly] mode: no writable roots, so nothing
// to protect in them.
func (p *Policy) WithoutWrites() *Policy {
	q := p.clone()
	q.f.Mode, q.f.WritableRoots, q.f.Protected = ReadOnly, nil, nil
	return q
}

// WithAllowList is p with the network off but for the allow-list r
// ([Policy.AllowList]); r is shared, not copied.
func (p *Policy) WithAllowList(r *AllowList) *Policy {
	q := p.clone()
	q.f.Network, q.f.Egress = false, r
	return q
}

// WithWritableRoot is p with root added to its writable roots as it is
// (a directory of agentbox's own, such as a private cache directory,
// that holds nothing to protect).
func (p *Policy) WithWritableRoot(root string) *Policy {
	q := p.clone()
	q.f.WritableRoots = append(q.f.WritableRoots, root)
	return q
}

// WithProtected is p with its protected paths replaced by pr, as they
// are: the caller keeps them consistent with the writable roots.
func (p *Policy) WithProtected(pr []Protected) *Policy {
	q := p.clone()
	q.f.Protected = slices.Clone(pr)
	return q
}

// clone copies p's state (its slices too), without what Resolve kept for
// [Policy.Widen]: a variant is not resolved from options.
func (p *Policy) clone() *Policy {
	f := p.f
	f.WritableRoots = slices.Clone(f.WritableRoots)
	f.Protected = slices.Clone(f.Protected)
	f.ProtectedNames = slices.Clone(f.ProtectedNames)
	f.AllowUnixSockets = slices.Clone(f.AllowUnixSockets)
	f.Publish = slices.Clone(f.Publish)
	f.HostPorts = slices.Clone(f.HostPorts)
	f.ToolCaches = toolcache.Clone(f.ToolCaches)
	f.PrivateTemps = slices.Clone(f.PrivateTemps)
	f.SharedTemps = slices.Clone(f.SharedTemps)
	f.Hidden = cloneHidden(f.Hidden)
	f.HideRules = cloneRules(f.HideRules)
	f.AllowRead = slices.Clone(f.AllowRead)
	f.Env = cloneEnv(f.Env)
	return &Policy{f: f}
}
