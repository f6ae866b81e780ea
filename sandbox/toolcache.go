package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

// cacheChecks describes, for doctor, where each tool cache goes.
func cacheChecks(pol *policy.Policy, overlays bool) []Check {
	if pol == nil || pol.Mode() != policy.WorkspaceWrite {
		return nil
	}
	if pol.ToolCacheMode() == policy.CachesOff {
		return []Check{{Name: "tool caches", OK: true, Detail: "off: caches under $HOME stay read-only"}}
	}
	var out []Check
	for _, d := range toolcache.Decide(pol.ToolCacheInputs(), overlays) {
		c := d.Cache
		name, detail := "cache "+c.Name, ""
		switch {
		case c.Programs && d.How == toolcache.Private:
			name = "programs " + c.Name
			detail = fmt.Sprintf("%s: %s (private to this workspace; the host's %s untouched)", toolcache.PrivateEnv(c, nil), toolcache.ProgramsDir(c), c.Host)
		case d.How == toolcache.Overlay:
			detail = fmt.Sprintf("overlay at %s: host cache read-only below, changes in %s", c.Host, toolcache.UpperDir(c))
		case d.How == toolcache.Private:
			detail = fmt.Sprintf("private: %s (host %s untouched)", toolcache.PrivateEnv(c, nil), c.Host)
		default:
			detail = fmt.Sprintf("untouched (%s): %s", c.Host, d.Why)
		}
		if d.How != toolcache.Untouched && len(c.Settings) > 0 {
			detail += "; sets " + strings.Join(c.Settings, " ")
		}
		out = append(out, Check{Name: name, OK: true, Detail: detail})
	}
	return out
}

// programDirs watches the private directories of programs (GOBIN,
// CARGO_INSTALL_ROOT) across one command, so that the user learns where
// what it installed went: not into the host's directory on PATH. A few
// lstats per directory before and after.
type programDirs []programDir

type programDir struct {
	c      policy.ToolCache
	root   string // the workspace's private directory, agentbox's own
	rel    string // the programs' directory under root, the command's
	before time.Time
}

func watchPrograms(pol *policy.Policy) programDirs {
	if pol == nil || pol.Mode() != policy.WorkspaceWrite {
		return nil
	}
	var out programDirs
	// Every backend places a directory of programs alike (overlays play
	// no part): private unless skipped or inside a writable root.
	for _, d := range toolcache.Decide(pol.ToolCacheInputs(), false) {
		if d.Cache.Programs && d.How == toolcache.Private {
			root := toolcache.PrivateRoot(d.Cache)
			rel, err := filepath.Rel(root, toolcache.ProgramsDir(d.Cache))
			if err != nil {
				continue
			}
			p := programDir{c: d.Cache, root: root, rel: rel}
			p.before = p.mtime()
			out = append(out, p)
		}
	}
	return out
}

// notes returns a line for each directory the command changed.
func (ps programDirs) notes() []string {
	var out []string
	for _, p := range ps {
		if m := p.mtime(); !m.IsZero() && !m.Equal(p.before) {
			out = append(out, fmt.Sprintf("%s are in %s (%s, private to this workspace), not in %s; copy those you trust from there, and never put that directory on your PATH: commands in the sandbox write it",
				p.c.Desc, filepath.Join(p.root, p.rel), p.c.Env, p.c.Host))
		}
	}
	return out
}

// mtime is the modification time of the programs' directory, zero when
// it is missing or any component below root is not a plain directory:
// the command may have put a symlink there, which is never followed.
func (p programDir) mtime() time.Time {
	dir := p.root
	var fi os.FileInfo
	for _, c := range strings.Split(p.rel, string(filepath.Separator)) {
		dir = filepath.Join(dir, c)
		var err error
		if fi, err = os.Lstat(dir); err != nil || !fi.IsDir() {
			return time.Time{}
		}
	}
	return fi.ModTime()
}

// checkPrivatePath refuses a command whose PATH holds a directory in the
// workspace's private tool directory (Windows checks it as it plans its
// caches, with its own path rules).
func checkPrivatePath(pol *policy.Policy, env []string) error {
	if runtime.GOOS == "windows" || pol.Mode() != policy.WorkspaceWrite {
		return nil
	}
	path := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "PATH" {
			path = v
		}
	}
	return toolcache.CheckPath(pol.ToolCaches(), path)
}

// setEnv returns env with kv's variable replaced (or added).
func setEnv(env []string, kv string) []string {
	name, _, _ := strings.Cut(kv, "=")
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); ok && k == name {
			continue
		}
		out = append(out, e)
	}
	return append(out, kv)
}
