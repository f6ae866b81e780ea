// Package fspath compares and resolves absolute paths as the policy and every
// backend do: by components, never as plain string prefixes.
package fspath

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Within reports whether path is root or lies beneath it.
func Within(path, root string) bool {
	if path == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(path, root)
}

// InnermostRoot returns the deepest root containing path, or "".
func InnermostRoot(path string, roots []string) string {
	best := ""
	for _, r := range roots {
		if Within(path, r) && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// FirstMissing returns path itself when its parent exists, else the first
// missing component: pinning that one keeps the whole chain from appearing.
func FirstMissing(path string) string {
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

// IsLink reports whether fi (from Lstat of path) is a link to follow: a
// symlink, or on Windows a junction, which Go reports as an irregular file
// but which redirects a path just the same.
func IsLink(path string, fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return true
	}
	if fi.Mode()&fs.ModeIrregular != 0 {
		_, err := os.Readlink(path)
		return err == nil
	}
	return false
}

// Resolve follows symlinks in path one component at a time, as the kernel
// does, and returns where it leads together with every symlink it passed
// through. Components past the first missing one are kept as written.
func Resolve(path string) (string, []string) {
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
		if !IsLink(next, fi) {
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

// JoinRaw makes rel absolute against base without simplifying "..": the
// kernel resolves "link/../x" through the link's target, and so does
// [Resolve]; filepath.Join would cancel the pair textually and protect a
// different directory from the one git then uses.
func JoinRaw(base, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return strings.TrimRight(base, string(filepath.Separator)) + string(filepath.Separator) + rel
}

// Windows paths are compared as Windows compares them, on every GOOS (so
// that Windows plans and policies are tested on Linux): separators '\'
// or '/', case-insensitive.

// WinClean normalises separators to '\' and drops a trailing one (except
// in a drive root such as "C:\").
func WinClean(p string) string {
	p = strings.ReplaceAll(p, "/", `\`)
	for len(p) > 3 && strings.HasSuffix(p, `\`) {
		p = p[:len(p)-1]
	}
	return p
}

// WinKey is the form Windows paths are compared in: cleaned and
// upper-cased.
func WinKey(p string) string { return strings.ToUpper(WinClean(p)) }

// WinWithin reports whether the Windows path p is root or lies beneath it.
func WinWithin(p, root string) bool {
	p, root = WinKey(p), WinKey(root)
	if p == root {
		return true
	}
	if !strings.HasSuffix(root, `\`) {
		root += `\`
	}
	return strings.HasPrefix(p, root)
}

// WinParent returns the directory containing the Windows path p, or p
// itself for a root.
func WinParent(p string) string {
	p = WinClean(p)
	i := strings.LastIndex(p, `\`)
	switch {
	case i < 0:
		return p
	case i == 2 && len(p) > 1 && p[1] == ':': // C:\x -> C:\
		if len(p) == 3 {
			return p
		}
		return p[:3]
	case i == 0:
		return p[:1]
	}
	return p[:i]
}
