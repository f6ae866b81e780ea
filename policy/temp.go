package policy

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
)

// PrivateTemp is a temporary directory the command gets a private one of
// instead of the host's, in workspace-write mode unless
// [sandbox_workspace_write] share_slash_tmp is set: /tmp and $TMPDIR
// (%TEMP% and %TMP% on Windows). Per-user servers (tmux, ssh control
// sockets, emacs, X11) are found by their users through these
// directories; what a command leaves in its private one is never found
// by the user's own programs. The host directory lies in agentbox's
// state directory, per workspace, and every run of the workspace
// (lone runs, sessions, the resident helper) uses the same one, so what
// one command writes there the next can read.
type PrivateTemp struct {
	// Path is the directory as the command's programs name it: /tmp,
	// or the variable's value with symlinks resolved.
	Path string
	// Dir is the host directory that stands in for Path. For a $TMPDIR
	// under a private /tmp it is the matching directory inside /tmp's
	// Dir.
	Dir string
	// Env is the variable naming Path (TMPDIR, TEMP, TMP); "" for /tmp.
	// Where the backend cannot show Dir at Path (macOS, Windows, Linux
	// without namespaces) it points this variable, or TMPDIR for /tmp,
	// at Dir.
	Env string
	// Keep are host directories inside Path that a backend showing Dir
	// at Path must keep visible there, read-only: the caller's home
	// (HOME=/tmp/x is not rare for service accounts), where it lies in
	// Path and is not Path itself. The writable roots inside Path stay
	// visible too, as writable roots, and so do the protected paths
	// outside every root (a worktree's gitdir, agentbox's own binary
	// linked by `go run`) and the listed allow_unix_sockets, read-only.
	Keep []string `json:",omitempty"`
}

// PrivateTemps are the policy's private temporary directories, /tmp
// first; empty outside workspace-write mode, with share_slash_tmp, and
// when no state directory can be named (then /tmp and $TMPDIR stay
// read-only).
func (p *Policy) PrivateTemps() []PrivateTemp { return append([]PrivateTemp(nil), p.f.PrivateTemps...) }

// TempDirFor is the host directory the command's TMPDIR (or %TEMP%)
// should name where the backend cannot remap paths: the private
// directory standing for $TMPDIR when there is one, else for /tmp; ""
// without private temporary directories.
func (p *Policy) TempDirFor() string {
	dir := ""
	for _, t := range p.f.PrivateTemps {
		if t.Env != "" {
			return t.Dir
		}
		if dir == "" {
			dir = t.Dir
		}
	}
	return dir
}

// joinFor joins elem onto base with goos's separator.
func joinFor(goos, base string, elem ...string) string {
	if goos == "windows" {
		return strings.TrimRight(base, `\/`) + `\` + strings.Join(elem, `\`)
	}
	return filepath.Join(append([]string{base}, elem...)...)
}

// tempDir is one temporary directory agentbox adds: its path, symlinks
// resolved, and the variable that named it ("" for /tmp).
type tempDir struct{ path, env string }

// privateTemps places temps (/tmp first, then the variables) for the
// workspace cwd: each gets a per-workspace directory under the state
// directory, but one inside a user's writable root (which the command
// may write anyway) or inside a private /tmp, which holds it.
func privateTemps(temps []tempDir, userRoots, keep []string, cwd, stateDir, goos string) []PrivateTemp {
	if stateDir == "" {
		return nil
	}
	root := agentdirs.TempRoot(stateDir)
	within := fspath.Within
	if goos == "windows" {
		// Spelled as the Windows backend spells it, on any OS (tests).
		root = fspath.WinClean(root)
		within = fspath.WinWithin
	}
	base := joinFor(goos, root, agentdirs.WorkspaceKey(cwd))
	var out []PrivateTemp
	var slash PrivateTemp // /tmp's, once placed
	for _, t := range temps {
		if inAny(t.path, userRoots, within) {
			continue
		}
		pt := PrivateTemp{Path: t.path, Env: t.env}
		switch {
		case goos == "windows":
			// One directory for %TEMP% and %TMP%: nothing tells
			// them apart but their names.
			pt.Dir = joinFor(goos, base, "temp")
		case t.env == "":
			pt.Dir = joinFor(goos, base, "tmp")
		case slash.Dir != "" && within(t.path, slash.Path):
			rel := strings.TrimPrefix(strings.TrimPrefix(t.path, slash.Path), "/")
			pt.Dir = slash.Dir
			if rel != "" {
				pt.Dir = filepath.Join(slash.Dir, rel)
			}
		default:
			pt.Dir = joinFor(goos, base, "tmpdir")
		}
		if slash.Dir == "" || !within(t.path, slash.Path) {
			for _, k := range keep {
				// Path itself cannot stay the host's (HOME=/tmp: the
				// private /tmp is the home then).
				if within(k, pt.Path) && k != pt.Path && !slices.Contains(pt.Keep, k) {
					pt.Keep = append(pt.Keep, k)
				}
			}
		}
		out = append(out, pt)
		if t.env == "" && goos != "windows" {
			slash = pt
		}
	}
	return out
}

func inAny(path string, roots []string, within func(string, string) bool) bool {
	for _, r := range roots {
		if within(path, r) {
			return true
		}
	}
	return false
}
