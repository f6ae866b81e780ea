package policy

import (
	"slices"

	"github.com/agentbox/agentbox/internal/policyhook"
)

// The functions internal/rawpolicy, internal/gitguard and
// internal/cacheplan reach through policyhook.
func init() {
	policyhook.New = func(f fields) *Policy { return &Policy{f: cloneFields(f)} }
	policyhook.Fields = func(p *Policy) fields { return cloneFields(p.f) }
	policyhook.SafeBareRepository = gitSafeBareRepository
	policyhook.KnownCache = func(name string) bool {
		return slices.ContainsFunc(knownCaches, func(d cacheDef) bool { return d.Name == name })
	}
	policyhook.CacheEnvValue = cacheEnvValue
	policyhook.Resolve = resolveEnv
	policyhook.ResolveFor = resolveFor
}

// cloneFields copies f's slices, so that neither side of New or Of can
// change what the other holds.
func cloneFields(f fields) fields {
	f.WritableRoots = slices.Clone(f.WritableRoots)
	f.Protected = slices.Clone(f.Protected)
	f.ProtectedNames = slices.Clone(f.ProtectedNames)
	f.AllowUnixSockets = slices.Clone(f.AllowUnixSockets)
	f.Publish = slices.Clone(f.Publish)
	f.HostPorts = slices.Clone(f.HostPorts)
	f.ToolCaches = cloneCaches(f.ToolCaches)
	f.PrivateTemps = slices.Clone(f.PrivateTemps)
	f.SharedTemps = slices.Clone(f.SharedTemps)
	return f
}
