package acl

import (
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
)

// Windows paths are compared here as Windows compares them: separators '\'
// or '/', case-insensitive. The functions work the same on every GOOS so the
// plan can be tested on Linux with paths like C:\work.

// Clean normalises separators to '\' and drops a trailing one (except in a
// drive root such as "C:\").
func Clean(p string) string { return fspath.WinClean(p) }

// Key is the form used to compare paths: cleaned and upper-cased.
func Key(p string) string { return fspath.WinKey(p) }

// SamePath reports whether a and b name the same path.
func SamePath(a, b string) bool { return Key(a) == Key(b) }

// Within reports whether p is root or lies beneath it.
func Within(p, root string) bool { return fspath.WinWithin(p, root) }

// Parent returns the directory containing p, or p itself for a root.
func Parent(p string) string { return fspath.WinParent(p) }

// Join joins a directory and a name with '\'.
func Join(dir, name string) string {
	dir = Clean(dir)
	if strings.HasSuffix(dir, `\`) {
		return dir + name
	}
	return dir + `\` + name
}

// longPathLimit is where agentbox switches to \\?\ paths: MAX_PATH (260)
// less the 12 characters a directory name must leave for an 8.3 file name
// (the limit CreateDirectory documents), so every path that might be too
// long for the ANSI-era limit gets the prefix.
const longPathLimit = 248

// LongPath returns p in the \\?\ form the Win32 security and file calls
// need beyond MAX_PATH ("Maximum Path Length Limitation"): C:\x becomes
// \\?\C:\x and \\server\share\x becomes \\?\UNC\server\share\x. Shorter
// paths, relative paths and paths already in a \\?\ or \\.\ form are
// returned as they are. The prefix turns off Windows' own normalisation,
// so p is cleaned here ('/' to '\') and must not contain . or ..
// components (policy paths are absolute and clean).
func LongPath(p string) string {
	if len(p) < longPathLimit || strings.HasPrefix(p, `\\?\`) || strings.HasPrefix(p, `\\.\`) {
		return p
	}
	c := strings.ReplaceAll(p, "/", `\`)
	switch {
	case len(c) >= 3 && c[1] == ':' && c[2] == '\\':
		return `\\?\` + c
	case strings.HasPrefix(c, `\\`):
		return `\\?\UNC\` + c[2:]
	}
	return p
}
