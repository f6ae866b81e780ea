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
