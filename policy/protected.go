package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// protectedPaths lists every carve-out for the given roots: each protected
// name in each root, the gitdir (and the common dir of a worktree) that a
// .git file points at, and the target of a protected name that is a symlink.
func protectedPaths(roots, names []string) ([]Protected, error) {
	byPath := map[string]Protected{}
	var add func(path, why string, depth int) error
	add = func(path, why string, depth int) error {
		if depth > 8 {
			return fmt.Errorf("protected path %s: too many levels of gitdir or symlink indirection", path)
		}
		path = firstMissing(filepath.Clean(path))
		if _, ok := byPath[path]; ok {
			return nil
		}
		pr := Protected{Path: path, Root: InnermostRoot(path, roots), Why: why}
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
		case fi.Mode()&fs.ModeSymlink != 0:
			pr.Kind = Symlink
			byPath[path] = pr
			target, err := symlinkTarget(path)
			if err != nil {
				return fmt.Errorf("protected path %s: %w", path, err)
			}
			return add(target, "target of "+path, depth+1)
		case fi.IsDir():
			pr.Kind = Dir
			byPath[path] = pr
			return nil
		default:
			pr.Kind = File
			byPath[path] = pr
			if filepath.Base(path) != ".git" || !fi.Mode().IsRegular() {
				return nil
			}
			gitdir, err := readGitdirFile(path)
			if err != nil || gitdir == "" {
				return err
			}
			if err := add(gitdir, "gitdir of "+path, depth+1); err != nil {
				return err
			}
			// A linked worktree's gitdir names the main repository's
			// .git through "commondir"; hooks and config live there.
			if common, err := readCommondir(gitdir); err == nil && common != "" {
				return add(common, "common dir of "+gitdir, depth+1)
			}
			return nil
		}
	}
	for _, r := range roots {
		for _, n := range names {
			if err := add(filepath.Join(r, n), n+" in "+r, 0); err != nil {
				return nil, err
			}
		}
	}
	out := make([]Protected, 0, len(byPath))
	for _, pr := range byPath {
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b Protected) int { return comparePaths(a.Path, b.Path) })
	return out, nil
}

// firstMissing returns path itself when its parent exists, else the first
// missing component: pinning that one keeps the whole chain from appearing.
func firstMissing(path string) string {
	for {
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		if _, err := os.Lstat(parent); err == nil {
			return path
		}
		path = parent
	}
}

// symlinkTarget resolves a symlink as far as the filesystem allows; a
// dangling link yields the absolute path it would point at.
func symlinkTarget(path string) (string, error) {
	if t, err := filepath.EvalSymlinks(path); err == nil {
		return t, nil
	}
	link, err := os.Readlink(path)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(link) {
		link = filepath.Join(filepath.Dir(path), link)
	}
	return resolveExistingPrefix(link), nil
}

// resolveExistingPrefix resolves symlinks in the longest existing prefix of
// path and appends the rest unchanged.
func resolveExistingPrefix(path string) string {
	path = filepath.Clean(path)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(path); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(path)
		if parent == path {
			return filepath.Join(path, rest)
		}
		rest = filepath.Join(filepath.Base(path), rest)
		path = parent
	}
}

// readGitdirFile parses a "gitdir: <path>" file as git writes it for
// worktrees and submodules; a relative path is relative to the file.
func readGitdirFile(path string) (string, error) {
	data, err := readSmall(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	rest, ok := bytes.CutPrefix(line, []byte("gitdir:"))
	if !ok {
		return "", nil
	}
	dir := strings.TrimSpace(string(rest))
	if dir == "" {
		return "", nil
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(path), dir)
	}
	return resolveExistingPrefix(dir), nil
}

func readCommondir(gitdir string) (string, error) {
	data, err := readSmall(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	if !sc.Scan() {
		return "", nil
	}
	dir := strings.TrimSpace(sc.Text())
	if dir == "" {
		return "", nil
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(gitdir, dir)
	}
	return resolveExistingPrefix(dir), nil
}

// readSmall reads at most 64 KiB: a gitdir file is one line, and a hostile
// workspace must not make agentbox read a huge file.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := f.Read(buf)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}
