package linux

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Placeholders make missing protected names (.git, .codex, .agents in a
// root that has none) uncreatable. A mount needs an existing mount point,
// so an empty directory is created on the host for the run and bound
// read-only over itself inside the sandbox, where it can be neither
// written, removed nor renamed.
//
// Runs that share a placeholder hold a shared flock on it; the last one
// out removes it. A record in the state directory remembers which
// directories agentbox created, so a run killed before its cleanup is
// swept up by the next run or by `agentbox cleanup`.
type Placeholders struct {
	dir  string // record directory, "" when none could be used
	held []heldPlaceholder
}

type heldPlaceholder struct {
	path string
	f    *os.File
	// placeholder: made by agentbox (now or by an earlier run), so the
	// last run out removes it; a real directory is only held.
	placeholder bool
}

// placeholderXattr marks a directory agentbox created as a placeholder.
// The sandbox cannot forge it: protected paths are read-only inside.
const placeholderXattr = "user.agentbox"

// lockWait bounds how long a run waits for a placeholder that another run
// is removing (or that a hostile process holds locked).
const lockWait = 5 * time.Second

// AcquirePlaceholders creates (or joins) a placeholder for each path.
func AcquirePlaceholders(paths []string, stateDir string) (*Placeholders, error) {
	p := &Placeholders{}
	if stateDir != "" {
		d := filepath.Join(stateDir, "placeholders")
		if err := os.MkdirAll(d, 0o700); err == nil {
			p.dir = d
		}
	}
	for _, path := range paths {
		f, err := p.acquire(path)
		if err != nil {
			p.Release()
			return nil, err
		}
		ph := f.created || isMarked(path) || p.recorded(path)
		p.held = append(p.held, heldPlaceholder{path, f.File, ph})
	}
	return p, nil
}

// acquired is an open, share-locked directory and whether we created it.
type acquired struct {
	*os.File
	created bool
}

func (p *Placeholders) acquire(path string) (acquired, error) {
	deadline := time.Now().Add(lockWait)
	for {
		created := false
		switch err := mkdirNoFollow(path); {
		case err == nil:
			created = true
			// Mark it on the directory itself, so a run of another user
			// holding it last still knows it is a placeholder; then make
			// it read-only (the mark needs write permission to set).
			unix.Setxattr(path, placeholderXattr, []byte("placeholder"), 0)
			os.Chmod(path, 0o555)
			p.record(path)
		case errors.Is(err, os.ErrExist):
		default:
			return acquired{}, fmt.Errorf("creating placeholder for protected path %s: %w", path, err)
		}
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, os.ErrNotExist) && time.Now().Before(deadline) {
			// Removed between our mkdir and our open by a run that held
			// it last (it had opened it before we could lock it): the
			// ordinary hand-over, so make it again.
			continue
		}
		if err != nil {
			if created {
				os.Remove(path)
			}
			return acquired{}, fmt.Errorf("protected path %s appeared as something other than a directory while starting; run again: %w", path, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
			f.Close()
			if time.Now().After(deadline) {
				return acquired{}, fmt.Errorf("placeholder %s stays locked by another process: %w", path, err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// The run that held it may have removed it between our open and
		// our lock; only the directory still at path protects anything.
		if sameFile(f, path) {
			return acquired{f, created}, nil
		}
		f.Close()
	}
}

// mkdirNoFollow creates path with no symlink anywhere on the way: the
// policy resolved the path already, so a symlink now means the tree was
// changed under us (by a concurrent sandbox, say) and the host must not be
// made to create a directory where the link points.
func mkdirNoFollow(path string) error {
	dir, name := filepath.Split(path)
	dfd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return &os.PathError{Op: "openat2", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	return nil
}

func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func (p *Placeholders) recordPath(path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(p.dir, hex.EncodeToString(sum[:16]))
}

func (p *Placeholders) record(path string) {
	if p.dir != "" {
		os.WriteFile(p.recordPath(path), []byte(path), 0o600)
	}
}

// Release drops this run's hold and removes every placeholder no other
// run still uses.
func (p *Placeholders) Release() {
	for _, h := range p.held {
		if h.placeholder {
			p.removeIfUnused(h.path, h.f)
		} else {
			h.f.Close()
		}
	}
	p.held = nil
}

// removeIfUnused removes path when f (open on it) can be locked
// exclusively: no other run holds it. Only an empty directory that
// agentbox recorded as its own is removed.
func (p *Placeholders) removeIfUnused(path string, f *os.File) {
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return // still in use; the last run out removes it
	}
	if !sameFile(f, path) {
		return
	}
	rec := ""
	ours := isMarked(path)
	if p.dir != "" {
		rec = p.recordPath(path)
		if b, err := os.ReadFile(rec); err == nil && string(b) == path {
			ours = true
		} else {
			rec = ""
		}
	}
	if !ours {
		return // a real directory of the user's, never ours to remove
	}
	// rmdir refuses a directory that is not empty: something the user
	// put there since is theirs, and stays.
	unix.Rmdir(path)
	if rec != "" {
		os.Remove(rec)
	}
}

func isMarked(path string) bool {
	buf := make([]byte, 32)
	n, err := unix.Lgetxattr(path, placeholderXattr, buf)
	return err == nil && string(buf[:n]) == "placeholder"
}

// recorded reports whether the state directory says agentbox made path.
func (p *Placeholders) recorded(path string) bool {
	if p.dir == "" {
		return false
	}
	b, err := os.ReadFile(p.recordPath(path))
	return err == nil && string(b) == path
}

// SweepPlaceholders removes placeholders left by runs that were killed
// before they could clean up. It returns the paths it removed.
func SweepPlaceholders(stateDir string) []string {
	p := &Placeholders{dir: filepath.Join(stateDir, "placeholders")}
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rec := filepath.Join(p.dir, e.Name())
		b, err := os.ReadFile(rec)
		if err != nil {
			continue
		}
		path := string(b)
		if p.recordPath(path) != rec {
			os.Remove(rec) // not written by us
			continue
		}
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(rec) // gone, or no longer ours to judge
			continue
		}
		p.removeIfUnused(path, f)
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			removed = append(removed, path)
		}
	}
	return removed
}
