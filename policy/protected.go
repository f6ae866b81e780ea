package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
		case isLink(path, fi):
			pr.Kind = Symlink
			byPath[path] = pr
			target, links := resolve(path)
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
			gitdir, err := readGitdirFile(path)
			if err != nil || gitdir == "" {
				return err
			}
			if _, err := addResolved(gitdir, "gitdir of "+path, depth+1); err != nil {
				return err
			}
			// A linked worktree's gitdir names the main repository's
			// .git through "commondir"; hooks and config live there.
			if common, err := readCommondir(gitdir); err == nil && common != "" {
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
		target, links := resolve(path)
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
	// its configuration names and submodules' .git files (gitpaths.go).
	// Only with .git protected: a caller who lifts that has chosen to let
	// the command write what git runs.
	if slices.Contains(names, ".git") {
		targets, err := gitTargets(roots, getenv)
		if err != nil {
			return nil, err
		}
		for _, t := range targets {
			// A path the command can point somewhere unusable (a symlink
			// loop, a non-directory parent) is as unusable to git: skip
			// it rather than fail every later run. The links met on
			// the way are protected before any error.
			target, _ := addResolved(t.path, t.why, 0)
			if t.file {
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

// isLink reports whether fi (from Lstat of path) is a link to follow: a
// symlink, or on Windows a junction, which Go reports as an irregular file
// but which redirects a path just the same.
func isLink(path string, fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return true
	}
	if fi.Mode()&fs.ModeIrregular != 0 {
		_, err := os.Readlink(path)
		return err == nil
	}
	return false
}

// resolve follows symlinks in path one component at a time, as the kernel
// does, and returns where it leads together with every symlink it passed
// through. Components past the first missing one are kept as written.
func resolve(path string) (string, []string) {
	var links []string
	vol := filepath.VolumeName(path)
	sep := string(filepath.Separator)
	cur := vol + sep
	parts := strings.Split(strings.Trim(path[len(vol):], sep), sep)
	for hops := 0; len(parts) > 0; {
		p := parts[0]
		parts = parts[1:]
		if p == "" || p == "." {
			continue
		}
		if p == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, p)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, parts...)...), links
		}
		if !isLink(next, fi) {
			cur = next
			continue
		}
		t, err := os.Readlink(next)
		if hops++; err != nil || hops > 40 {
			return filepath.Join(append([]string{next}, parts...)...), links
		}
		links = append(links, next)
		if filepath.IsAbs(t) {
			tvol := filepath.VolumeName(t)
			cur = tvol + sep
			t = t[len(tvol):]
		}
		parts = append(strings.Split(strings.Trim(t, sep), sep), parts...)
	}
	return cur, links
}

// readGitdirFile parses a "gitdir: <path>" file as git writes it for
// worktrees and submodules; a relative path is relative to the file.
func readGitdirFile(path string) (string, error) {
	data, err := git.ReadSmall(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	// As git reads it (setup.c, read_gitfile_gently): the whole file,
	// which must start with "gitdir: ", less trailing CR and LF only;
	// spaces and inner newlines are part of the path.
	rest, ok := bytes.CutPrefix(data, []byte("gitdir: "))
	if !ok {
		return "", nil
	}
	dir := strings.TrimRight(string(rest), "\r\n")
	if dir == "" {
		return "", nil
	}
	return joinRaw(filepath.Dir(path), dir), nil
}

// readCommondir reads a worktree gitdir's "commondir" as git does
// (path.c): trailing CR and LF trimmed, relative to the gitdir.
func readCommondir(gitdir string) (string, error) {
	data, err := git.ReadSmall(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return "", err
	}
	dir := strings.TrimRight(string(data), "\r\n")
	if dir == "" {
		return "", nil
	}
	return joinRaw(gitdir, dir), nil
}

// joinRaw makes rel absolute against base without simplifying "..": the
// kernel resolves "link/../x" through the link's target, and so does
// [resolve]; filepath.Join would cancel the pair textually and protect a
// different directory from the one git then uses.
func joinRaw(base, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return strings.TrimRight(base, string(filepath.Separator)) + string(filepath.Separator) + rel
}
