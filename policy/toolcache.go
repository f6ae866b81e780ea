package policy

import (
	"fmt"
	"slices"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/toolcache"
)

// ToolCacheMode is [sandbox_workspace_write] tool_caches: how the tools'
// caches under $HOME are made writable for the command without ever making
// the host's own cache writable (an object planted there would run in the
// user's next build outside the sandbox).
type ToolCacheMode string

const (
	// CachesOverlay (the default) shows each host cache copy-on-write:
	// the host's cache is the read-only lower layer of an overlay whose
	// upper layer is a per-workspace directory, so builds start warm and
	// stay warm between runs. Where overlays are unavailable (degraded
	// Linux, macOS, Windows) it behaves as CachesPrivate.
	CachesOverlay ToolCacheMode = "overlay"
	// CachesPrivate points each tool's variable (GOCACHE, npm_config_cache,
	// ...) at the per-workspace directory: cold the first time, never the
	// host's cache.
	CachesPrivate ToolCacheMode = "private"
	// CachesOff leaves caches as they are: read-only, like the rest of
	// $HOME.
	CachesOff ToolCacheMode = "off"
)

// ParseToolCacheMode validates a tool_caches value.
func ParseToolCacheMode(s string) (ToolCacheMode, error) {
	switch m := ToolCacheMode(s); m {
	case CachesOverlay, CachesPrivate, CachesOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown tool cache mode %q (want overlay, private or off)", s)
}

// ToolCache is one known cache as resolved for a policy; the table of
// known caches and the rules for placing them are [toolcache]'s.
type ToolCache = toolcache.Cache

// resolveToolCaches fills p.ToolCaches for the mode: every known cache
// with its host path and per-workspace layer, a cache that overlaps a
// protected path skipped. It only reads the file system; backends create
// the layers.
func resolveToolCaches(p *Policy, getenv func(string) string, goos, stateDir string) {
	if p.f.ToolCacheMode == CachesOff || p.f.Mode != WorkspaceWrite || stateDir == "" {
		return
	}
	for _, c := range toolcache.Resolve(getenv, goos, stateDir, p.f.Cwd) {
		if c.Skip == "" {
			for _, pr := range p.f.Protected {
				if fspath.Within(c.Host, pr.Path) || fspath.Within(pr.Path, c.Host) {
					c.Skip = fmt.Sprintf("overlaps protected %s (%s)", pr.Path, pr.Why)
					break
				}
			}
		}
		p.f.ToolCaches = append(p.f.ToolCaches, c)
	}
}

// ToolCacheInputs is what placing this policy's tool caches
// ([toolcache.Decide]) reads of it.
func (p *Policy) ToolCacheInputs() toolcache.Inputs {
	in := toolcache.Inputs{
		Caches:        p.ToolCaches(),
		Private:       p.f.ToolCacheMode == CachesPrivate,
		WritableRoots: p.WritableRoots(),
	}
	for _, t := range p.f.PrivateTemps {
		in.PrivateTemps = append(in.PrivateTemps, toolcache.Temp{Path: t.Path, Keep: slices.Clone(t.Keep)})
	}
	return in
}
