package linux

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/cacheplan"
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
)

// CachePlan turns decisions into init-stage steps: pins for the directories
// between an overlaid cache and the writable root it lies in (so that
// renaming them aside, and putting a plain directory where the overlay
// was, fails with EBUSY), the cache mounts, and the paths the Landlock
// layer must let the command write. layers maps a cache name to its
// prepared layer (see PrepareCaches).
func CachePlan(p *policy.Policy, ds []cacheplan.Decision, layers map[string]CacheLayer) (pins []Mount, mounts []CacheMount, writable []string, err error) {
	// One writable mount serves every private directory (and fallback).
	for _, l := range layers {
		if l.Private != "" {
			root := filepath.Dir(l.Private)
			mounts = []CacheMount{{Name: "private", Target: root, Upper: root}}
			writable = []string{root}
			break
		}
	}
	pinned := map[string]bool{}
	for _, r := range p.WritableRoots() {
		pinned[r] = true // already mount points
	}
	for _, d := range ds {
		l, ok := layers[d.Cache.Name]
		if d.How != cacheplan.Untouched && !ok {
			return nil, nil, nil, fmt.Errorf("tool cache %s: no layer prepared", d.Cache.Name)
		}
		if d.How == cacheplan.Overlay {
			mounts = append(mounts, CacheMount{Name: d.Cache.Name, Target: d.Cache.Host, Lower: d.Cache.Host, Upper: l.Upper, Work: l.Work, Fallback: l.Private})
			writable = append(writable, d.Cache.Host)
			// Inside a writable root (a workspace at $HOME), the command
			// could otherwise rename a directory on the way aside, or
			// re-point a symlink on it (~/.cache -> /data/cache), and
			// leave the host's tools a cache of its making: pin every
			// directory and link on both the named and the resolved path.
			// The named path up to its first symlink, then the resolved
			// path: past a symlink, the named path runs through its target.
			var chain []string
			for _, a := range append(ancestors(d.Cache.Named), d.Cache.Named) {
				chain = append(chain, a)
				if fi, err := os.Lstat(a); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
					break
				}
			}
			chain = append(chain, ancestors(d.Cache.Host)...)
			for _, a := range chain {
				root := fspath.InnermostRoot(a, p.WritableRoots())
				if root == "" || a == root || a == d.Cache.Host || pinned[a] {
					continue
				}
				pinned[a] = true
				kind := Pin
				if fi, err := os.Lstat(a); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
					kind = PinLink
				}
				pins = append(pins, Mount{Kind: kind, Path: a})
			}
		}
	}
	slices.SortFunc(pins, func(a, b Mount) int { return byDepth(a.Path, b.Path) })
	return pins, mounts, writable, nil
}

// ancestors lists path's proper ancestors, outermost first.
func ancestors(path string) []string {
	var out []string
	for a := filepath.Dir(path); a != filepath.Dir(a); a = filepath.Dir(a) {
		out = append([]string{a}, out...)
	}
	return out
}

// CacheLayer is a cache's per-workspace directories as prepared on the
// host for one run, symlinks resolved.
type CacheLayer struct {
	Upper, Work, Private string
}
