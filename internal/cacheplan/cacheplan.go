// Package cacheplan decides where each of a policy's tool caches goes in
// the sandbox: an overlay over the host's cache, a private directory the
// tool is pointed at, or nowhere (left read-only). The backends mount or
// grant what it decides.
package cacheplan

import (
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/policyhook"
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
		case overlays && privateTempOf(c.Host, p) != "":
			// GOCACHE=/tmp/go: the command's /tmp is the workspace's
			// own already, and the host's is not there to overlay.
			d.Why = "lies in the sandbox's private " + privateTempOf(c.Host, p) + ", the workspace's own: used there as it is"
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

// privateTempOf is the private temporary directory (as the command sees
// it, in a mount namespace) that path lies in, but for the host
// directories kept visible there (a home under /tmp); "" when none.
func privateTempOf(path string, p *policy.Policy) string {
	for _, t := range p.PrivateTemps() {
		if !fspath.Within(path, t.Path) {
			continue
		}
		for _, k := range t.Keep {
			if fspath.Within(path, k) {
				return ""
			}
		}
		return t.Path
	}
	return ""
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

// UpperDir is the overlay's upper layer of c: the command's changes.
func UpperDir(c policy.ToolCache) string { return filepath.Join(c.Layer, "upper") }

// WorkDir is the overlay's work directory of c (same file system as UpperDir).
func WorkDir(c policy.ToolCache) string { return filepath.Join(c.Layer, "work") }

// PrivateRoot holds the private directories of all of a workspace's
// caches, so that one writable mount (or profile rule) serves them all.
func PrivateRoot(c policy.ToolCache) string {
	return filepath.Join(filepath.Dir(c.Layer), "private")
}

// PrivateDir is the directory the tool of c is pointed at when no overlay
// is used; the tool creates it.
func PrivateDir(c policy.ToolCache) string { return filepath.Join(PrivateRoot(c), c.Name) }

// PrivateEnv returns the NAME=value that points the tool of c at its
// private directory, given the command's environment, or "" when the
// cache has no relocating variable.
func PrivateEnv(c policy.ToolCache, env []string) string { return PrivateEnvAt(c, PrivateDir(c), env) }

// PrivateEnvAt is PrivateEnv for the private directory spelled as dir
// (as the sandbox sees it, or in another platform's syntax).
func PrivateEnvAt(c policy.ToolCache, dir string, env []string) string {
	if c.Env == "" {
		return ""
	}
	old := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == c.Env {
			old = v
		}
	}
	return c.Env + "=" + policyhook.CacheEnvValue(c.Name, dir, old)
}
