// Package gitguard is what backends do about git around a run with
// allow_git_writes: which paths of an opened .git stay read-only
// ([ReadOnlyPaths], [Carveouts]), which .git may be opened at all
// ([WritableDir]), and the [Guard] that, after the run, moves aside the
// gitlinks and nested repositories a command planted.
package gitguard

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
)

// ReadOnly is one path inside a git directory that stays read-only when
// [sandbox_workspace_write] allow_git_writes lets the command write the
// rest: everything through which git would run a program or read another
// repository's configuration, objects or hooks. Sources:
// gitrepository-layout(5), git-config(1) (config, config.worktree and
// extensions.worktreeConfig), githooks(5), git-worktree(1) and
// gitsubmodules(7).
type ReadOnly struct {
	// Rel is relative to the git directory, with forward slashes.
	Rel string
	// Dir: a directory (everything beneath stays read-only too).
	Dir bool
	// Placeholder is the content of the file made for the run when Rel
	// is a missing file, chosen so that git reads it as if it were not
	// there; it keeps the name from being created by the command.
	Placeholder string
	// Why is for messages and the README.
	Why string
}

// ReadOnlyPaths is the list, as data. Objects, refs, logs, the index,
// HEAD, packed-refs, the *_HEAD files, lock files, COMMIT_EDITMSG and the
// rebase/merge state stay writable: they are what add, commit, checkout,
// switch, stash, reset, merge, rebase and fetch write.
var ReadOnlyPaths = []ReadOnly{
	{Rel: "config", Why: "repository configuration: core.hooksPath, core.fsmonitor, core.sshCommand, filter and diff drivers, aliases, include paths all run programs or read other files"},
	{Rel: "config.worktree", Why: "per-worktree configuration, read when extensions.worktreeConfig is set; same power as config"},
	{Rel: "commondir", Placeholder: ".", Why: "names the directory whose config, hooks and objects git uses; \".\" means this directory itself"},
	{Rel: "hooks", Dir: true, Why: "hooks are programs git runs (githooks(5))"},
	{Rel: "info", Dir: true, Why: "info/attributes selects filter and diff drivers; info/exclude, info/sparse-checkout and info/grafts change what git sees"},
	{Rel: "objects/info", Dir: true, Why: "objects/info/alternates and http-alternates make git read another repository's objects"},
	{Rel: "modules", Dir: true, Why: "submodules' git directories, each with its own config and hooks"},
	{Rel: "worktrees", Dir: true, Why: "linked worktrees' git directories: config.worktree, commondir and gitdir each redirect git"},
	{Rel: "remotes", Dir: true, Why: "legacy remote definitions (URLs git fetches from)"},
	{Rel: "branches", Dir: true, Why: "legacy shorthand URLs for fetch and push"},
}

// WritableDir reports whether pr is a git directory that
// allow_git_writes opens for writing: an existing .git directory inside a
// writable root that holds a repository (a HEAD file, as git itself
// requires; an empty placeholder made for a missing .git does not). A
// worktree's or submodule's gitdir, reached through a .git file, stays
// read-only as a whole.
func WritableDir(pr policy.Protected) bool {
	if pr.Kind != policy.Dir || pr.Root == "" || filepath.Base(pr.Path) != ".git" {
		return false
	}
	fi, err := os.Lstat(filepath.Join(pr.Path, "HEAD"))
	return err == nil && fi.Mode().IsRegular()
}

// Carveout is one path of [ReadOnlyPaths] resolved for a git
// directory.
type Carveout struct {
	ReadOnly
	// Path is absolute. When the entry's parent is missing (a git
	// directory without objects/), Path is the first missing component and
	// Dir is true: it is guarded whole, which makes that part read-only.
	Path string
	// Exists: something is at Path (it is then bound read-only as it is,
	// whatever its type; a symlink there is refused, see [Carveouts]).
	Exists bool
}

// ErrSymlink is returned when a read-only git path is a symlink: a
// bind over it would follow the link.
var ErrSymlink = errors.New("is a symlink")

// Carveouts resolves [ReadOnlyPaths] for the git directory gitdir.
func Carveouts(gitdir string) ([]Carveout, error) {
	var out []Carveout
	seen := map[string]bool{}
	for _, g := range ReadOnlyPaths {
		c := Carveout{ReadOnly: g, Path: filepath.Join(gitdir, filepath.FromSlash(g.Rel))}
		if first := fspath.FirstMissing(c.Path); first != c.Path {
			c.Path, c.Dir, c.Placeholder = first, true, ""
		}
		if seen[c.Path] {
			continue
		}
		seen[c.Path] = true
		fi, err := os.Lstat(c.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, &fs.PathError{Op: "allow_git_writes", Path: c.Path, Err: ErrSymlink}
		default:
			c.Exists = true
		}
		out = append(out, c)
	}
	return out, nil
}
