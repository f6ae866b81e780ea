// Package toolcache holds what agentbox knows of the tools' caches under
// $HOME (go, npm, cargo, pip and the rest) on every OS: the table of known
// caches and the variables that move them, their resolution for a
// workspace, where each goes in the sandbox, and the per-workspace layers'
// names and mounts. The backends create, lock, mount or grant what it
// decides.
package toolcache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
)

// Cache is one known cache as resolved for a policy.
type Cache struct {
	Name string
	Desc string
	// Host is where the cache lives on the host: symlinks resolved when
	// it exists, as named by the tool's rules otherwise. "" when it cannot
	// be named (no $HOME).
	Host string
	// Named is the path as the tool names it, before symlinks are
	// resolved: a symlink on the way must not be replaceable either.
	Named string
	// HostExists: Host is an existing directory.
	HostExists bool
	// Env, when set, is the variable that points the tool at a private
	// directory instead of the host's cache; "" when no variable moves
	// this cache alone, so it stays read-only outside overlays.
	Env string
	// Layer is the per-workspace directory under agentbox's state
	// directory that holds this cache's overlay layers; it persists
	// between runs of the same workspace. The private directories of a
	// workspace's caches lie beside the layers.
	Layer string
	// Skip, when set, says why agentbox leaves this cache alone (it lies
	// in a protected path, say); the cache is then read-only as before.
	Skip string
	// Programs: a directory of programs, never overlaid, always private;
	// they are in Bin under the private directory. See cacheDef.
	Programs bool   `json:",omitempty"`
	Bin      string `json:",omitempty"`
	// PinEnv, Covers and Settings are the table's (see cacheDef).
	PinEnv   bool     `json:",omitempty"`
	Covers   []string `json:",omitempty"`
	Settings []string `json:",omitempty"`
	// Kept is the first of the table's Keeps present in Host: a file the
	// tool reads there, so Host must not be relocated wholesale.
	Kept string `json:",omitempty"`
}

// Clone copies cs and the slices each holds.
func Clone(cs []Cache) []Cache {
	if cs == nil {
		return nil
	}
	out := make([]Cache, len(cs))
	for i, c := range cs {
		c.Covers = slices.Clone(c.Covers)
		c.Settings = slices.Clone(c.Settings)
		out[i] = c
	}
	return out
}

// EnvValue is the value of c's variable ([Cache].Env) that points
// the tool at dir, given the variable's current value old (Maven's
// MAVEN_OPTS keeps what it held); dir itself for every other cache. The
// rule is found by c.Name in this build's table.
func (c Cache) EnvValue(dir, old string) string {
	for _, d := range knownCaches {
		if d.Name == c.Name && d.EnvValue != nil {
			return d.EnvValue(dir, old)
		}
	}
	return dir
}

// Known reports whether this build's table has a cache named name: a
// tool's relocation rule is code, not data, so an encoded policy may name
// only caches the build knows.
func Known(name string) bool {
	return slices.ContainsFunc(knownCaches, func(d cacheDef) bool { return d.Name == name })
}

// Resolve lists every known cache for a command in workspace, as the
// environment getenv names them on goos, with its host path and its
// per-workspace layer under stateDir. It only reads the file system (and
// only when goos is this OS); backends create the layers. A cache that
// overlaps the state directory, or has no home to be found in, is marked
// Skip; the caller adds its own reasons for the others.
func Resolve(getenv func(string) string, goos, stateDir, workspace string) []Cache {
	home := getenv("HOME")
	if goos == "windows" {
		home = getenv("USERPROFILE")
	}
	if !agentdirs.Abs(home, goos) {
		home = ""
	}
	e := cacheEnv{getenv: getenv, goos: goos, home: home}
	base := filepath.Join(agentdirs.ToolCacheRoot(stateDir), agentdirs.WorkspaceKey(workspace))
	var out []Cache
	for _, d := range knownCaches {
		c := Cache{Name: d.Name, Desc: d.Desc, Env: d.Env,
			Layer: filepath.Join(base, d.Name), Host: d.Path(e),
			Programs: d.Programs, Bin: d.Bin, PinEnv: d.PinEnv,
			Covers: slices.Clone(d.Covers), Settings: slices.Clone(d.Settings)}
		c.Named = c.Host
		if c.Host != "" && goos == runtime.GOOS {
			c.Host, c.HostExists = resolvePath(c.Host)
			for _, k := range d.Keeps {
				if _, err := os.Lstat(filepath.Join(c.Host, k)); c.HostExists && err == nil {
					c.Kept = filepath.Join(c.Host, k)
					break
				}
			}
		}
		switch {
		case c.Host == "":
			c.Skip = "no home directory to find it in"
		case fspath.Within(c.Host, stateDir) || fspath.Within(stateDir, c.Host):
			c.Skip = "overlaps agentbox's state directory"
		}
		out = append(out, c)
	}
	return out
}

// resolvePath resolves symlinks in an existing cache path. A path that
// exists but is not a directory, or cannot be resolved, is treated as
// missing (the tool would fail on it anyway; it is never mounted).
func resolvePath(p string) (string, bool) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return p, false
		}
		return filepath.Clean(p), false
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return filepath.Clean(p), false
	}
	return filepath.Clean(real), true
}
