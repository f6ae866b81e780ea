package toolcache

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
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

// Inputs is what placing a policy's caches reads of it
// (policy.Policy.ToolCacheInputs).
type Inputs struct {
	// Caches are the policy's resolved caches.
	Caches []Cache
	// Private: tool_caches = "private", never an overlay.
	Private bool
	// WritableRoots are the paths the command may write.
	WritableRoots []string
	// PrivateTemps are the sandbox's private temporary directories.
	PrivateTemps []Temp
}

// Temp is a private temporary directory as the command names it (Path)
// and the host directories inside it that stay visible there (Keep); see
// policy.PrivateTemp.
type Temp struct {
	Path string
	Keep []string
}

// Decision is the placement of one cache and, when untouched, why.
type Decision struct {
	Cache Cache
	How   How
	Why   string
}

// Decide places each of the policy's tool caches. overlays says
// whether overlay mounts are possible (a user namespace: not in degraded
// mode).
func Decide(in Inputs, overlays bool) []Decision {
	var out []Decision
	roots := in.WritableRoots
	for _, c := range in.Caches {
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
		case c.Programs:
			// A directory of programs is never overlaid: the tool
			// installs into a private one, whether or not the host's
			// exists, unless the user put it in a writable root.
			if r := fspath.InnermostRoot(c.Host, roots); r != "" {
				d.Why = "lies in the writable root " + r + ": programs go there"
			} else {
				private("")
			}
		case rootAtOrBelow(c.Host, roots) != "":
			// An overlay would cover a root the user asked to write.
			d.Why = "is or contains the writable root " + rootAtOrBelow(c.Host, roots) + ": left as it is"
		case overlays && privateTempOf(c.Host, in.PrivateTemps) != "":
			// GOCACHE=/tmp/go: the command's /tmp is the workspace's
			// own already, and the host's is not there to overlay.
			d.Why = "lies in the sandbox's private " + privateTempOf(c.Host, in.PrivateTemps) + ", the workspace's own: used there as it is"
		case len(c.Covers) > 0:
			// A tool's whole home: never overlaid (it holds the tool's
			// configuration and programs), private where that loses
			// nothing the tool reads and no cache in it is overlaid.
			switch {
			case c.Kept != "":
				d.Why = "holds " + c.Kept + ", which a private " + c.Env + " would hide from the tool: left as it is (its caches are overlaid where they exist)"
			case coversOverlay(out, c.Covers):
				d.Why = "its caches are overlaid: left as it is"
			default:
				d.How = Private
			}
		case in.Private:
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
	// The caches a private home holds move with it.
	for _, h := range out {
		if h.How != Private || len(h.Cache.Covers) == 0 {
			continue
		}
		for i, d := range out {
			if d.How == Untouched && d.Cache.Skip == "" && slices.Contains(h.Cache.Covers, d.Cache.Name) {
				out[i].Why = "moves with " + h.Cache.Name + " (" + h.Cache.Env + ")"
			}
		}
	}
	return out
}

// privateTempOf is the private temporary directory (as the command sees
// it, in a mount namespace) that path lies in, but for the host
// directories kept visible there (a home under /tmp); "" when none.
func privateTempOf(path string, temps []Temp) string {
	for _, t := range temps {
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

// coversOverlay reports whether one of the named caches is overlaid.
func coversOverlay(ds []Decision, names []string) bool {
	for _, d := range ds {
		if d.How == Overlay && slices.Contains(names, d.Cache.Name) {
			return true
		}
	}
	return false
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

// PrivateName names the directory, beside a workspace's cache layers,
// that holds the private directories of all its caches.
const PrivateName = "private"

// OverlayDirs are the upper and work directories of an overlay layer
// in base: a cache's own layer, or a run's throwaway one.
func OverlayDirs(base string) (upper, work string) {
	return filepath.Join(base, "upper"), filepath.Join(base, "work")
}

// UpperDir is the overlay's upper layer of c: the command's changes.
func UpperDir(c Cache) string { u, _ := OverlayDirs(c.Layer); return u }

// WorkDir is the overlay's work directory of c (same file system as UpperDir).
func WorkDir(c Cache) string { _, w := OverlayDirs(c.Layer); return w }

// PrivateRoot holds the private directories of all of a workspace's
// caches, so that one writable mount (or profile rule) serves them all.
func PrivateRoot(c Cache) string {
	return filepath.Join(filepath.Dir(c.Layer), PrivateName)
}

// PrivateDir is the directory the tool of c is pointed at when no overlay
// is used; the tool creates it.
func PrivateDir(c Cache) string { return filepath.Join(PrivateRoot(c), c.Name) }

// PrivateEnv returns the NAME=value that points the tool of c at its
// private directory, given the command's environment, or "" when the
// cache has no relocating variable.
func PrivateEnv(c Cache, env []string) string { return PrivateEnvAt(c, PrivateDir(c), env) }

// PrivateEnvAt is PrivateEnv for the private directory spelled as dir
// (as the sandbox sees it, or in another platform's syntax).
func PrivateEnvAt(c Cache, dir string, env []string) string {
	if c.Env == "" {
		return ""
	}
	old := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == c.Env {
			old = v
		}
	}
	return c.Env + "=" + c.EnvValue(dir, old)
}

// ProgramsDir is where the programs of a directory-of-programs entry
// (Cache.Programs) land when it is private: PrivateDir, or
// its Bin subdirectory.
func ProgramsDir(c Cache) string { return filepath.Join(PrivateDir(c), c.Bin) }

// Env returns every NAME=value a decision sets for the command, the
// private directory spelled as dir: the relocating variable of a
// private cache, the cache's own path for an overlaid one whose default
// another entry moves (Cache.PinEnv), and the cache's
// settings whenever it is placed. env is the command's environment (for
// the variable's old value).
func Env(d Decision, dir string, env []string) []string {
	var out []string
	switch d.How {
	case Private:
		if kv := PrivateEnvAt(d.Cache, dir, env); kv != "" {
			out = append(out, kv)
		}
	case Overlay:
		if d.Cache.PinEnv && d.Cache.Env != "" {
			out = append(out, d.Cache.Env+"="+d.Cache.Host)
		}
	default:
		return nil
	}
	return append(out, d.Cache.Settings...)
}

// CheckPath refuses (fails closed) when a directory on the command's
// PATH lies in the workspace's private tool directory, which commands in
// the sandbox write: the user's own shell would run what one planted
// there (the private directories of programs are the likeliest to be
// added). list is PATH's value, split by filepath.SplitList.
func CheckPath(cs []Cache, list string) error {
	if len(cs) == 0 || list == "" {
		return nil
	}
	root := PrivateRoot(cs[0])
	for _, p := range filepath.SplitList(list) {
		if p != "" && filepath.IsAbs(p) && fspath.Within(filepath.Clean(p), root) {
			return fmt.Errorf(`tool caches: %s on PATH lies in the private tool directory %s, which commands in the sandbox write; remove it from PATH (copy the programs you trust elsewhere), or set [sandbox_workspace_write] tool_caches = "off"`, p, root)
		}
	}
	return nil
}
