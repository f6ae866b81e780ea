// Package fspath compares absolute, cleaned paths as the policy and every
// backend do: by components, never as plain string prefixes.
package fspath

import (
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
