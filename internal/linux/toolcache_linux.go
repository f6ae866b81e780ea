package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/toolcache"
)

// Lock files. A run that overlays a cache holds the upperLock in its layer
// directory exclusively (two overlays sharing an upper layer are undefined
// behaviour in overlayfs); a run that uses the workspace's private
// directory holds the workspace's privateLock shared (tools share their own
// caches safely). Cleanup takes all of them exclusively, so it never
// removes a layer in use.
const (
	upperLock   = "upper.lock"
	privateLock = "private.lock"
	// runPrefix names a throwaway upper layer, used when another run of
	// the same workspace holds the persistent one.
	runPrefix = "run-"
	runLock   = "lock"
)

// CacheLayers are the layers one run holds.
type CacheLayers struct {
	Layers map[string]toolcache.Layer
	// PrivateRoot is the workspace's private directory, when a cache
	// needs it (symlinks resolved).
	PrivateRoot string
	locks       []*os.File
	temps       []string
}

// PrepareCaches creates and locks the per-workspace layers the decisions
// need. Release them when the run ends.
func PrepareCaches(ds []toolcache.Decision) (*CacheLayers, error) {
	cl := &CacheLayers{Layers: map[string]toolcache.Layer{}}
	for _, d := range ds {
		if d.How == toolcache.Untouched {
			continue
		}
		l, err := cl.prepare(d)
		if err != nil {
			cl.Release()
			return nil, fmt.Errorf("preparing the %s layer in %s: %w", d.Cache.Desc, d.Cache.Layer, err)
		}
		cl.Layers[d.Cache.Name] = l
	}
	return cl, nil
}

func (cl *CacheLayers) prepare(d toolcache.Decision) (toolcache.Layer, error) {
	var l toolcache.Layer
	if d.Cache.Env != "" {
		// The private directory: the placement itself, or the fallback
		// if the kernel refuses the overlay.
		root, err := cl.privateRoot(toolcache.PrivateRoot(d.Cache))
		if err != nil {
			return l, err
		}
		l.Private = filepath.Join(root, d.Cache.Name)
	}
	if d.How == toolcache.Private {
		return l, nil
	}
	dir := d.Cache.Layer
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return l, err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return l, err
	}
	base := real
	if ok, err := cl.lock(filepath.Join(real, upperLock), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return l, err
	} else if ok {
		sweepRuns(real)
	} else {
		// Another run of this workspace holds the persistent upper
		// layer: this run gets its own, discarded at the end. It still
		// starts from the host's cache.
		tmp, err := os.MkdirTemp(real, runPrefix)
		if err != nil {
			return l, err
		}
		cl.temps = append(cl.temps, tmp)
		if ok, err := cl.lock(filepath.Join(tmp, runLock), unix.LOCK_EX|unix.LOCK_NB); err != nil || !ok {
			return l, fmt.Errorf("locking %s: %v", tmp, err)
		}
		base = tmp
	}
	l.Upper, l.Work = toolcache.OverlayDirs(base)
	return l, mkdirs(l.Upper, l.Work)
}

// privateRoot creates the workspace's private directory once per run and
// holds its lock shared; it returns the directory with symlinks resolved.
func (cl *CacheLayers) privateRoot(dir string) (string, error) {
	if cl.PrivateRoot != "" {
		return cl.PrivateRoot, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if _, err := cl.lock(filepath.Join(filepath.Dir(real), privateLock), unix.LOCK_SH); err != nil {
		return "", err
	}
	cl.PrivateRoot = real
	return real, nil
}

// lock opens (creating) path and flocks it; false when LOCK_NB found it
// held.
func (cl *CacheLayers) lock(path string, how int) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	cl.locks = append(cl.locks, f)
	return true, nil
}

// Release removes this run's throwaway layers and drops its locks.
func (cl *CacheLayers) Release() {
	if cl == nil {
		return
	}
	for _, t := range cl.temps {
		removeTree(t)
	}
	for _, f := range cl.locks {
		f.Close()
	}
	cl.temps, cl.locks = nil, nil
}

func mkdirs(paths ...string) error {
	for _, p := range paths {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if fi, err := os.Lstat(p); err != nil {
			return err
		} else if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	return nil
}

// sweepRuns removes throwaway layers of runs that were killed before they
// could remove them (their lock is free).
func sweepRuns(layer string) {
	ents, _ := os.ReadDir(layer)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runPrefix) {
			continue
		}
		p := filepath.Join(layer, e.Name())
		f, err := os.OpenFile(filepath.Join(p, runLock), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			removeTree(p)
		}
		if f != nil {
			f.Close()
		}
	}
}

// removeTree removes a layer. Go's module cache makes its directories
// read-only and overlayfs leaves its work directory mode 000, so
// directories are made writable first; symlinks are never followed (the
// tree is the command's doing), and the caller holds the layer's lock, so
// no sandbox changes it meanwhile.
func removeTree(p string) error {
	filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(path, 0o700)
			if err != nil {
				// Unreadable until now: walk it again.
				return removeTree(path)
			}
		}
		return nil
	})
	return os.RemoveAll(p)
}

// RemoveCacheLayers deletes every workspace's cache layers under the state
// directory when no running sandbox holds any of them, for `agentbox
// cleanup`.
func RemoveCacheLayers(stateDir string) (removed, kept []string) {
	root := agentdirs.ToolCacheRoot(stateDir)
	workspaces, _ := os.ReadDir(root)
	for _, w := range workspaces {
		wdir := filepath.Join(root, w.Name())
		var cl CacheLayers
		free, _ := cl.lock(filepath.Join(wdir, privateLock), unix.LOCK_EX|unix.LOCK_NB)
		caches, _ := os.ReadDir(wdir)
		for _, c := range caches {
			if c.IsDir() && c.Name() != toolcache.PrivateName {
				ok, _ := cl.lock(filepath.Join(wdir, c.Name(), upperLock), unix.LOCK_EX|unix.LOCK_NB)
				free = free && ok
			}
		}
		if free && removeTree(wdir) == nil {
			removed = append(removed, wdir)
		} else {
			kept = append(kept, wdir)
		}
		cl.Release()
	}
	os.Remove(root) // only when empty
	return removed, kept
}
