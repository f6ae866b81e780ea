package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/git"
)

// protectedPaths lists every carve-out for the given roots: each protected
// name in each root, the gitdir (and the common dir of a worktree) that a
// .git file points at, the target of a protected name that is a symlink,
// every symlink met on the way to one of those (a link inside a writable
// root could otherwise be re-pointed to redirect the protected path), and
// the extra paths the caller names (agentbox's own config, state and
// executable), and labeled ones (path -> why: a profile's "read" entries).
func protectedPaths(roots, names []string, extra []string, labeled map[string]string, getenv func(string) string) ([]Protected, error) {
	byPath := map[string]Protected{}
	files := map[string]bool{} // resolved paths git reads as files
	// Existing empty regular files: what another run's file placeholder
	// looks like (a FIFO a command planted, or the user's real config,
	// is never held as one).
	emptyFiles := map[string]bool{}
	var add func(path, why string, depth int) error
	var addResolved func(path, why string, depth int) (string, error)
	add = func(path, why string, depth int) error {
		if depth > 16 {
			return fmt.Errorf("protected path %s: too many levels of gitdir or symlink indirection", path)
		}
		path = fspath.FirstMissing(filepath.Clean(path))
		if _, ok := byPath[path]; ok {
			return nil
		}
		pr := Protected{Path: path, Root: fspath.InnermostRoot(path, roots), Why: why}
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			pr.Kind = Missing
			byPath[path] = pr
			return nil
		case err != nil:
			return fmt.Errorf("protected path %s: %w", path, err)
		}
		switch {
		case fspath.IsLink(path, fi):
			pr.Kind = Symlink
			byPath[path] = pr
			target, links := fspath.Resolve(path)
			for _, l := range links {
				if err := add(l, "symlink on the way from "+path, depth+1); err != nil {
					return err
				}
			}
			return add(target, "target of "+path, depth+1)
		case fi.IsDir():
			pr.Kind = Dir
			byPath[path] = pr
			return nil
		default:
			pr.Kind = File
			byPath[path] = pr
			emptyFiles[path] = fi.Mode().IsRegular() && fi.Size() == 0
			if filepath.Base(path) != ".git" || !fi.Mode().IsRegular() {
				return nil
			}
			gitdir, err := git.ReadGitdirFile(path)
			if err != nil || gitdir == "" {
				return err
			}
			if _, err := addResolved(gitdir, "gitdir of "+path, depth+1); err != nil {
				return err
			}
			// A linked worktree's gitdir names the main repository's
			// .git through "commondir"; hooks and config live there.
			if common, err := git.ReadCommondir(gitdir); err == nil && common != "" {
				_, err := addResolved(common, "common dir of "+gitdir, depth+1)
				return err
			}
			return nil
		}
	}
	// addResolved protects where path really leads, which it returns, and
	// every symlink that leads there.
	addResolved = func(path, why string, depth int) (string, error) {
		if !filepath.IsAbs(path) {
			return "", fmt.Errorf("protected path %q is not absolute", path)
		}
		target, links := fspath.Resolve(path)
		for _, l := range links {
			if err := add(l, "symlink on the way to "+target, depth); err != nil {
				return target, err
			}
		}
		return target, add(target, why, depth)
	}
	for _, r := range roots {
		for _, n := range names {
			p := filepath.Join(r, n)
			if err := add(p, n+" in "+r, 0); err != nil {
				return nil, err
			}
		}
	}
	// What git run on the host afterwards would execute or trust: paths
	// its configuration names and submodules' .git files (internal/git's Targets).
	// Only with .git protected: a caller who lifts that has chosen to let
	// the command write what git runs.
	if slices.Contains(names, ".git") {
		targets, err := git.Targets(roots, getenv)
		if err != nil {
			return nil, err
		}
		for _, t := range targets {
			// A path the command can point somewhere unusable (a symlink
			// loop, a non-directory parent) is as unusable to git: skip
			// it rather than fail every later run. The links met on
			// the way are protected before any error.
			target, _ := addResolved(t.Path, t.Why, 0)
			if t.File {
				files[target] = true
			}
		}
	}
	for _, e := range extra {
		if _, err := addResolved(e, "agentbox's own "+e, 0); err != nil {
			return nil, err
		}
	}
	// Paths the config keeps read-only, each with its reason.
	for _, e := range slices.Sorted(maps.Keys(labeled)) {
		if _, err := addResolved(e, labeled[e], 0); err != nil {
			return nil, err
		}
	}
	out := make([]Protected, 0, len(byPath))
	for _, pr := range byPath {
		pr.FileWhenMissing = files[pr.Path] && (pr.Kind == Missing || pr.Kind == File && emptyFiles[pr.Path])
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b Protected) int { return comparePaths(a.Path, b.Path) })
	return out, nil
}
