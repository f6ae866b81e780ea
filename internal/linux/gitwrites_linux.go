package linux

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// gitFileXattr marks a placeholder file agentbox made in a .git directory.
const gitFileXattr = "user.agentbox"

// GitHeld are the placeholders one allow_git_writes run holds: directories
// through the ordinary placeholder mechanism, files here. A file
// placeholder is held with a shared flock; the last run out (the one that
// gets the lock exclusively) removes it if agentbox made it. Its content
// is what git reads as "not there" (an empty config, commondir "."), so
// one left behind by a killed run does not change what git does.
type GitHeld struct {
	dirs  *Placeholders
	files []heldGitFile
}

type heldGitFile struct {
	path string
	f    *os.File
}

// HoldGitPlaceholders creates (or joins) the placeholders GitWritesPlan
// asked for. gitdir bounds the directory placeholders: one that another
// run's placeholder forces up to an ancestor stops at the git directory.
// DirPaths then says where each directory placeholder is held.
//
// Directory placeholders come from pool and go back there (see Pool);
// nil makes and removes them.
func HoldGitPlaceholders(dirs []GitDir, files []GitFile, stateDir string, pool *Pool) (*GitHeld, error) {
	g := &GitHeld{}
	if len(dirs) > 0 {
		var held []HeldDir
		for _, d := range dirs {
			held = append(held, HeldDir{Path: d.Path, Root: d.GitDir, Missing: true})
		}
		ph, err := AcquirePooled(held, stateDir, pool)
		if err != nil {
			return nil, err
		}
		g.dirs = ph
	}
	for _, gf := range files {
		f, err := holdGitFile(gf)
		if err != nil {
			g.Release()
			return nil, fmt.Errorf("allow_git_writes: placeholder %s: %w", gf.Path, err)
		}
		g.files = append(g.files, heldGitFile{gf.Path, f})
	}
	return g, nil
}

func holdGitFile(gf GitFile) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(gf.Path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			if _, err := f.WriteString(gf.Content); err != nil {
				f.Close()
				os.Remove(gf.Path)
				return nil, err
			}
			// Best effort: without xattrs the mark is missing and
			// the last run out leaves the harmless file behind.
			unix.Fsetxattr(int(f.Fd()), gitFileXattr, []byte("git-placeholder"), 0)
		} else if errors.Is(err, os.ErrExist) {
			f, err = os.OpenFile(gf.Path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if errors.Is(err, os.ErrNotExist) {
				continue // removed by its last holder meanwhile
			}
			if err != nil {
				return nil, err
			}
		} else {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			f.Close()
			return nil, err
		}
		// Still the file at that name (not one its last holder removed
		// while we waited for the lock)?
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) == nil && unix.Lstat(gf.Path, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			return f, nil
		}
		f.Close()
	}
	return nil, errors.New("it keeps vanishing (another run is removing it)")
}

// DirPaths lists where the directory placeholders are held, in the order
// they were asked for (an ancestor of the path asked for, possibly).
func (g *GitHeld) DirPaths() []string {
	if g == nil || g.dirs == nil {
		return nil
	}
	return g.dirs.Paths()
}

// Held lists the directory and file placeholders held, with
// descriptors (see [Placeholders.Held]).
func (g *GitHeld) Held() []HeldPath {
	if g == nil {
		return nil
	}
	out := g.dirs.Held()
	for _, f := range g.files {
		out = append(out, HeldPath{Path: f.path, File: f.f})
	}
	return out
}

// Release drops this run's hold; the last holder removes what agentbox
// made.
func (g *GitHeld) Release() {
	if g == nil {
		return
	}
	for _, h := range g.files {
		fd := int(h.f.Fd())
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			buf := make([]byte, 64)
			if n, err := unix.Fgetxattr(fd, gitFileXattr, buf); err == nil && string(buf[:n]) == "git-placeholder" {
				var a, b unix.Stat_t
				if unix.Fstat(fd, &a) == nil && unix.Lstat(h.path, &b) == nil && a.Ino == b.Ino {
					os.Remove(h.path)
				}
			}
		}
		h.f.Close()
	}
	g.files = nil
	if g.dirs != nil {
		g.dirs.Release()
		g.dirs = nil
	}
}
