package toolcache

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/fspath"
)

// Mount is one tool cache step of the Linux init stage, applied after the
// plan's read-only carve-outs (the layers live in agentbox's state
// directory, itself a carve-out).
type Mount struct {
	Name string `json:"name"`
	// Target is where the cache appears inside the sandbox.
	Target string `json:"target"`
	// Lower, Upper and Work make an overlay at Target (all host paths,
	// free of symlinks). Without Lower, Upper is bound writable at Target.
	Lower string `json:"lower,omitempty"`
	Upper string `json:"upper"`
	Work  string `json:"work,omitempty"`
	// Fallback, for an overlay, is the private directory to bind instead
	// if the kernel refuses the overlay (an upper layer on a file system
	// overlayfs cannot use, such as NFS), and FallbackEnv the variable
	// that points the tool at it. Without them a refused overlay fails
	// the run.
	Fallback    string `json:"fallback,omitempty"`
	FallbackEnv string `json:"fallback_env,omitempty"`
}

// Layer is a cache's per-workspace directories as prepared on the host
// for one run, symlinks resolved.
type Layer struct {
	Upper, Work, Private string
}

// Pin is a directory (or, Link, a symlink) on the way to an overlaid
// cache inside a writable root, which the stage makes a mount point so
// that renaming it aside fails with EBUSY.
type Pin struct {
	Path string
	Link bool
}

// Plan turns decisions into Linux stage steps: pins for the directories
// between an overlaid cache and the writable root it lies in (so that
// renaming them aside, and putting a plain directory where the overlay
// was, fails), the cache mounts, and the paths the Landlock layer must
// let the command write. roots are the policy's writable roots; layers
// maps a cache name to its prepared layer; env is the command's
// environment, for the variable an overlay's fallback sets.
func Plan(roots []string, ds []Decision, layers map[string]Layer, env []string) (pins []Pin, mounts []Mount, writable []string, err error) {
	// One writable mount serves every private directory (and fallback).
	for _, l := range layers {
		if l.Private != "" {
			root := filepath.Dir(l.Private)
			mounts = []Mount{{Name: "private", Target: root, Upper: root}}
			writable = []string{root}
			break
		}
	}
	pinned := map[string]bool{}
	for _, r := range roots {
		pinned[r] = true // already mount points
	}
	for _, d := range ds {
		l, ok := layers[d.Cache.Name]
		if d.How != Untouched && !ok {
			return nil, nil, nil, fmt.Errorf("tool cache %s: no layer prepared", d.Cache.Name)
		}
		if d.How == Overlay {
			m := Mount{Name: d.Cache.Name, Target: d.Cache.Host, Lower: d.Cache.Host, Upper: l.Upper, Work: l.Work, Fallback: l.Private}
			if m.Fallback != "" {
				m.FallbackEnv = PrivateEnvAt(d.Cache, m.Fallback, env)
			}
			mounts = append(mounts, m)
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
				root := fspath.InnermostRoot(a, roots)
				if root == "" || a == root || a == d.Cache.Host || pinned[a] {
					continue
				}
				pinned[a] = true
				fi, err := os.Lstat(a)
				pins = append(pins, Pin{Path: a, Link: err == nil && fi.Mode()&fs.ModeSymlink != 0})
			}
		}
	}
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
