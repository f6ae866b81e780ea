// Package cacheplan decides where each of a policy's tool caches goes in
// the sandbox: an overlay over the host's cache, a private directory the
// tool is pointed at, or nowhere (left read-only). The backends mount or
// grant what it decides.
package cacheplan

import (
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
)

// How is where one tool cache goes in the sandbox.
type How string

const (
	// Overlay: the host's cache, read-only, under a per-workspace
	// upper layer, mounted at the cache's own path.
	Overlay How = "overlay"
	// Private: the tool's variable points at the per-workspace
	// directory, which is bound writable at its own path.
	Private How = "private"
	// Untouched: left read-only, as the rest of the host.
	Untouched How = "untouched"
)

// Decision is the placement of one cache and, when untouched, why.
type Decision struct {
	Cache policy.ToolCache
	How   How
	Why   string
}

// Decide places each of the policy's tool caches. overlays says
// whether overlay mounts are possible (a user namespace: not in degraded
// mode).
func Decide(p *policy.Policy, overlays bool) []Decision {
	var out []Decision
	roots := p.WritableRoots()
	for _, c := range p.ToolCaches() {
		d := Decision{Cache: c, How: Untouched}
		private := func(why string) {
			if c.Env != "" {
				d.How = Private
			} else {
				d.Why = why + ", and no variable relocates it alone: left read-only"
			}
		}
		switch {
		case c.Skip != "":
			d.Why = c.Skip
		case rootAtOrBelow(c.Host, roots) != "":
			// An overlay would cover a root the user asked to write.
			d.Why = "is or contains the writable root " + rootAtOrBelow(c.Host, roots) + ": left as it is"
		case p.ToolCacheMode() == policy.CachesPrivate:
			private("tool_caches is private")
		case !overlays:
			private("overlays need user namespaces")
		case c.HostExists:
			d.How = Overlay
		default:
			private("not on the host")
		}
		out = append(out, d)
	}
	return out
}

// rootAtOrBelow returns a writable root that is path or lies inside it.
func rootAtOrBelow(path string, roots []string) string {
	for _, r := range roots {
		if fspath.Within(r, path) {
			return r
		}
	}
	return ""
}
