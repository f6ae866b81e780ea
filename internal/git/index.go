package git

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Limits on what agentbox reads from a git index. The index lives in the
// read-only .git, so a command cannot plant a hostile one, but a corrupt or
// huge one must still cost bounded time and memory and never panic.
const (
	maxIndexEntries = 4 << 20 // git itself has no limit; 4 Mi paths is far past any real repository
	maxIndexPath    = 64 << 10
	maxGitlinks     = 4096
)

// IndexGitlinks returns the paths of the gitlink entries (mode 160000:
// submodules) of the git index at path, in index order. The format is
// gitformat-index(5): a 12-byte header ("DIRC", version 2, 3 or 4, entry
// count), then the entries; extensions and the trailing checksum are not
// needed. hashLen is the object id size: 20 (SHA-1) or 32 (SHA-256).
//
// A missing index means no submodules. A split index (core.splitIndex)
// keeps most entries in $GIT_DIR/sharedindex.<id>: the caller reads those
// files as well.
func IndexGitlinks(path string, hashLen int) ([]string, error) {
	return ReadIndexGitlinks(path, hashLen, false, nil)
}

// CheckedIndexGitlinks is IndexGitlinks for an index the sandboxed command
// may have written: it also fails on an entry whose path git must never
// write (see [SafeIndexPath]). git does not check the paths of an index
// it reads, and `git checkout .` or `git restore .` writes an entry
// "../../.bashrc" outside the worktree.
func CheckedIndexGitlinks(path string, hashLen int, each func(IndexEntry)) ([]string, error) {
	return ReadIndexGitlinks(path, hashLen, true, each)
}

// IndexEntry is what the guard after a run needs of one index entry.
type IndexEntry struct {
	Path string
	Mode uint32
	// Hidden: marked assume-unchanged (CE_VALID) or skip-worktree,
	// either of which makes git status skip the file's worktree copy.
	Hidden bool
}

// ReadIndexGitlinks reads the gitlinks of the index at path, calling each
// (when not nil) for every entry; strict is [CheckedIndexGitlinks].
func ReadIndexGitlinks(path string, hashLen int, strict bool, each func(IndexEntry)) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	links, err := parseIndex(bufio.NewReaderSize(f, 16<<10), hashLen, strict, each)
	if err != nil {
		return nil, fmt.Errorf("git index %s: %w", path, err)
	}
	return links, nil
}

// ParseIndex reads an index from r as [ReadIndexGitlinks] reads one from
// a file, for a caller that opened it itself (through a directory
// descriptor, say).
func ParseIndex(r io.Reader, hashLen int, strict bool, each func(IndexEntry)) ([]string, error) {
	return parseIndex(bufio.NewReaderSize(r, 16<<10), hashLen, strict, each)
}

var errIndexTruncated = errors.New("truncated")

func parseIndexGitlinks(r *bufio.Reader, hashLen int) ([]string, error) {
	return parseIndex(r, hashLen, false, nil)
}

// parseIndex returns the gitlinks; strict, it fails on an unsafe path.
// each, if not nil, is called for every entry.
func parseIndex(r *bufio.Reader, hashLen int, strict bool, each func(IndexEntry)) ([]string, error) {
	if hashLen != 20 && hashLen != 32 {
		return nil, fmt.Errorf("unsupported object id length %d", hashLen)
	}
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, errIndexTruncated
	}
	if string(hdr[:4]) != "DIRC" {
		return nil, errors.New("not a git index (bad signature)")
	}
	version := binary.BigEndian.Uint32(hdr[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("unsupported index version %d", version)
	}
	count := binary.BigEndian.Uint32(hdr[8:12])
	if count > maxIndexEntries {
		return nil, fmt.Errorf("%d entries is more than agentbox reads (%d)", count, maxIndexEntries)
	}
	// Fixed part of an entry: ctime, mtime (8 each), dev, ino, mode, uid,
	// gid, size (4 each), the object id, and 16 bits of flags.
	fixed := 40 + hashLen + 2
	buf := make([]byte, fixed+2)
	var links []string
	var prev []byte // v4: the previous entry's path
	for i := uint32(0); i < count; i++ {
		if _, err := io.ReadFull(r, buf[:fixed]); err != nil {
			return nil, errIndexTruncated
		}
		mode := binary.BigEndian.Uint32(buf[24:28])
		flags := binary.BigEndian.Uint16(buf[fixed-2 : fixed])
		n := fixed
		if flags&0x4000 != 0 { // extended flags (version 3 and later)
			if version < 3 {
				return nil, fmt.Errorf("entry %d: extended flags in a version %d index", i, version)
			}
			if _, err := io.ReadFull(r, buf[fixed:fixed+2]); err != nil {
				return nil, errIndexTruncated
			}
			n += 2
		}
		var name []byte
		if version == 4 {
			// The path is the previous one less its last `strip` bytes,
			// followed by a NUL-terminated suffix; no padding.
			strip, err := readIndexVarint(r)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			if strip > uint64(len(prev)) {
				return nil, fmt.Errorf("entry %d: strips %d bytes from a %d-byte path", i, strip, len(prev))
			}
			suffix, err := readIndexString(r)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			keep := len(prev) - int(strip)
			if keep+len(suffix) > maxIndexPath {
				return nil, fmt.Errorf("entry %d: path longer than %d bytes", i, maxIndexPath)
			}
			name = append(prev[:keep:keep], suffix...)
			prev = name
		} else {
			s, err := readIndexString(r)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			name = s
			// Entries are padded with 1 to 8 NULs (the terminator
			// included) to a multiple of 8 bytes.
			total := (n + len(s) + 8) &^ 7
			if pad := total - n - len(s) - 1; pad > 0 {
				if _, err := r.Discard(pad); err != nil {
					return nil, errIndexTruncated
				}
			}
		}
		if each != nil {
			hidden := flags&0x8000 != 0 // CE_VALID
			if n > fixed && binary.BigEndian.Uint16(buf[fixed:fixed+2])&0x4000 != 0 {
				hidden = true // CE_SKIP_WORKTREE
			}
			each(IndexEntry{Path: string(name), Mode: mode, Hidden: hidden})
		}
		if strict && !SafeIndexPath(string(name)) {
			return nil, fmt.Errorf("entry %d: unsafe path %q (git would write it outside the worktree or into .git)", i, name)
		}
		if mode>>12 == 0o16 { // S_IFGITLINK
			if len(links) >= maxGitlinks {
				return nil, fmt.Errorf("more than %d submodules", maxGitlinks)
			}
			links = append(links, string(name))
		}
	}
	return links, nil
}

// readIndexString reads up to and including a NUL; the NUL is dropped.
func readIndexString(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice(0)
		if len(out)+len(chunk) > maxIndexPath+1 {
			return nil, fmt.Errorf("path longer than %d bytes", maxIndexPath)
		}
		out = append(out, chunk...)
		switch {
		case err == nil:
			return out[:len(out)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, errIndexTruncated
		}
	}
}

// readIndexVarint decodes git's offset varint (varint.c): 7 bits a byte,
// high bit set on all but the last, and each continuation adds one before
// shifting, so every value has exactly one encoding.
func readIndexVarint(r *bufio.Reader) (uint64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, errIndexTruncated
	}
	val := uint64(c & 127)
	for c&128 != 0 {
		if c, err = r.ReadByte(); err != nil {
			return 0, errIndexTruncated
		}
		if val+1 > (1<<57)-1 { // would overflow on the shift, as git checks
			return 0, errors.New("varint overflow")
		}
		val = ((val + 1) << 7) | uint64(c&127)
	}
	return val, nil
}

// SafeIndexPath reports whether an index path names a place inside the
// worktree: relative, slash-separated, with no empty, ".", ".." or ".git"
// component. git refuses to check out anything else (verify_path); a path
// that is not safe is skipped rather than joined.
func SafeIndexPath(p string) bool {
	if p == "" || strings.ContainsRune(p, 0) {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		switch strings.ToLower(c) {
		case "", ".", "..", ".git":
			return false
		}
	}
	return true
}
