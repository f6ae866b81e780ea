package git

import (
	"bytes"
	"path/filepath"
	"strings"
)

// IsDotGit reports whether git would take the entry name for ".git":
// on a case-insensitive file system .GIT is the same entry, HFS+ ignores
// some code points in names (git's is_hfs_dotgit: ".g\u200cit" is .git
// there) and Windows drops trailing dots and spaces (is_ntfs_dotgit).
// All count, on every system: erring towards yes costs a weirdly named
// directory its trust, no more.
func IsDotGit(name string) bool {
	if len(name) == 4 {
		return strings.EqualFold(name, ".git")
	}
	if len(name) < 4 || name[0] != '.' && name[0] < 0x80 {
		return false
	}
	clean := strings.Map(func(r rune) rune {
		if hfsIgnorable(r) {
			return -1
		}
		return r
	}, name)
	return strings.EqualFold(strings.TrimRight(clean, ". "), ".git")
}

// hfsIgnorable are the code points HFS+ leaves out of names it compares
// (the list git's utf8.c keeps).
func hfsIgnorable(r rune) bool {
	switch {
	case r == 0x200c, r == 0x200d, r == 0x200e, r == 0x200f,
		0x202a <= r && r <= 0x202e, 0x206a <= r && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// DirEntries are the entries that make a directory a git directory for
// git's discovery (is_git_directory; see [IsGitDir]).
var DirEntries = []string{"HEAD", "objects", "refs", "commondir"}

// A Dir is one directory as [IsGitDir] looks into it, through the
// caller's own file access (which may be bound to a descriptor, so that
// nothing is followed out of it).
type Dir interface {
	// ReadFile reads at most max bytes of name, not following a symlink.
	// found is false when nothing is at name; complete is false when
	// the file is larger than max.
	ReadFile(name string, max int) (data []byte, found, complete bool, err error)
	// Exists reports whether something is at name; err is any failure
	// to tell.
	Exists(name string) (bool, error)
}

// IsGitDir reports whether git's is_git_directory would take d for a
// git directory (setup.c): a HEAD that validate_headref accepts, and
// objects and refs that access(2) finds searchable in the common
// directory, which is d itself or what a commondir file names. It errs
// towards yes: a commondir file of any content counts (it can name any
// directory that has objects and refs, the user's own repository
// included), objects and refs count whatever their type (a symlink to a
// directory, an executable file and, with the reftable format, a refs
// file pass git's test), and so does a HEAD that cannot be read.
func IsGitDir(d Dir) (bool, error) {
	data, found, complete, err := d.ReadFile("HEAD", 4096)
	if !found {
		return false, nil
	}
	if err == nil && complete && !ValidHead(data) {
		return false, nil
	}
	// A HEAD that is a symlink, FIFO or too large: git may still follow
	// or read it; it counts as a HEAD.
	if ok, err := d.Exists("commondir"); ok || err != nil {
		return ok, err
	}
	for _, n := range []string{"objects", "refs"} {
		if ok, err := d.Exists(n); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// ValidHead reports whether a HEAD's content passes validate_headref:
// "ref:", optional white space and "refs/", or an object id in hex
// (either case) followed by anything.
func ValidHead(data []byte) bool {
	if len(data) > 255 {
		data = data[:255] // git reads no more
	}
	if ref, ok := bytes.CutPrefix(data, []byte("ref:")); ok {
		return bytes.HasPrefix(bytes.TrimLeft(ref, " \t\n\v\f\r"), []byte("refs/"))
	}
	return hexPrefix(data, 40) || hexPrefix(data, 64)
}

func hexPrefix(b []byte, n int) bool {
	if len(b) < n {
		return false
	}
	for _, c := range b[:n] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// HashLen is the length in bytes of an object id in the repository
// whose config holds the entries config: SHA-256 repositories say so
// (extensions.objectFormat), all others use SHA-1.
func HashLen(config []ConfigEntry) int {
	for _, e := range config {
		if e.Name == "extensions.objectformat" && strings.EqualFold(e.Value, "sha256") {
			return 32
		}
	}
	return 20
}

// IndexFiles are the index of the git directory gitdir and the shared
// files of a split index (sharedindex.<id>, which the index names).
func IndexFiles(gitdir string) []string {
	shared, _ := filepath.Glob(filepath.Join(gitdir, "sharedindex.*"))
	return append([]string{filepath.Join(gitdir, "index")}, shared...)
}

// IsIndexName reports whether rel, relative to a git directory, is one
// of its [IndexFiles].
func IsIndexName(rel string) bool {
	return rel == "index" || strings.HasPrefix(rel, "sharedindex.") && !strings.Contains(rel, "/")
}
