package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"
)

// tempLock is the lock file in a workspace's private temporary
// directory's parent: every run using it holds it shared, `agentbox
// cleanup` exclusively, so cleanup never removes a directory a sandbox
// shows. It lies beside the directories the sandbox sees, never in them.
const tempLock = "lock"

// tempLockWait bounds the wait for a workspace's lock: a command can open
// the lock file (the state directory is read-only to it, not hidden) and
// hold it exclusively; the next run then fails closed rather than hang.
const tempLockWait = 5 * time.Second

// TempDirs are the private temporary directories one run (or session)
// holds: created, locked, and with symlinks resolved.
type TempDirs struct {
	// Real maps each policy.PrivateTemp.Dir to its path with symlinks
	// resolved.
	Real  map[string]string
	locks []*os.File
}

// PrepareTemps creates the policy's private temporary directories (mode
// 0700), a $TMPDIR inside the private /tmp included, and holds each
// workspace's lock shared until Release.
func PrepareTemps(p *policy.Policy) (*TempDirs, error) {
	td := &TempDirs{Real: map[string]string{}}
	var own []policy.PrivateTemp // those with a directory of their own
	for _, t := range p.PrivateTemps() {
		if parent := ownerOf(t, own); parent != nil {
			// Inside /tmp's directory, which the command writes: made
			// through descriptors, following no link it planted.
			real := td.Real[parent.Dir]
			rel := strings.TrimPrefix(t.Dir, parent.Dir)
			if err := makeDirBeneath(real, rel); err != nil {
				td.Release()
				return nil, fmt.Errorf("private temporary directory %s for $%s %s: %w (remove it, or run agentbox cleanup)", t.Dir, t.Env, t.Path, err)
			}
			td.Real[t.Dir] = filepath.Join(real, rel)
			continue
		}
		real, err := td.prepare(t.Dir)
		if err != nil {
			td.Release()
			return nil, fmt.Errorf("private temporary directory %s for %s: %w", t.Dir, t.Path, err)
		}
		td.Real[t.Dir] = real
		own = append(own, t)
	}
	return td, nil
}

// ownerOf is the entry of own whose directory holds t's, or nil.
func ownerOf(t policy.PrivateTemp, own []policy.PrivateTemp) *policy.PrivateTemp {
	for i := range own {
		if fspath.Within(t.Dir, own[i].Dir) {
			return &own[i]
		}
	}
	return nil
}

// prepare makes dir and its workspace directory, locks the workspace
// (once per run) and returns dir with symlinks resolved. Only agentbox
// writes in the workspace directory (the state directory is read-only in
// every sandbox), so plain path calls are safe there.
func (td *TempDirs) prepare(dir string) (string, error) {
	ws := filepath.Dir(dir)
	var realWS string
	for try := 0; ; try++ {
		if err := os.MkdirAll(ws, 0o700); err != nil {
			return "", err
		}
		var err error
		if realWS, err = filepath.EvalSymlinks(ws); err != nil {
			return "", err
		}
		if td.holds(realWS) {
			break
		}
		f, err := lockShared(filepath.Join(realWS, tempLock))
		if errors.Is(err, fs.ErrNotExist) && try < 3 {
			continue // cleanup removed the directory meanwhile
		}
		if err != nil {
			return "", err
		}
		td.locks = append(td.locks, f)
		break
	}
	real := filepath.Join(realWS, filepath.Base(dir))
	if err := os.Mkdir(real, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if fi, err := os.Lstat(real); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", real)
	}
	return real, nil
}

func (td *TempDirs) holds(ws string) bool {
	for _, f := range td.locks {
		if filepath.Dir(f.Name()) == ws {
			return true
		}
	}
	return false
}

// lockShared opens (creating) the lock file path and holds it shared,
// waiting at most tempLockWait for an exclusive holder. A lock file that
// cleanup removed while we waited is no lock: it is opened again.
func lockShared(path string) (*os.File, error) {
	deadline := time.Now().Add(tempLockWait)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			var held, named unix.Stat_t
			if unix.Fstat(int(f.Fd()), &held) == nil && unix.Lstat(path, &named) == nil && held.Dev == named.Dev && held.Ino == named.Ino {
				return f, nil
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is held exclusively by another process (a command of an earlier run may hold it): waited %v", path, tempLockWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Release drops the run's locks.
func (td *TempDirs) Release() {
	if td == nil {
		return
	}
	for _, f := range td.locks {
		f.Close()
	}
	td.locks = nil
}

// Apply points sp at the prepared directories: each BindPrivate step's
// source, with symlinks resolved (the init stage follows none).
func (td *TempDirs) Apply(sp *spec.Spec) {
	mounts := make([]spec.Mount, len(sp.FS.Mounts))
	for i, m := range sp.FS.Mounts {
		if m.Kind == spec.BindPrivate {
			if real, ok := td.Real[m.Source]; ok {
				m.Source = real
			}
		}
		mounts[i] = m
	}
	sp.FS.Mounts = mounts
}

// RemoveTemps deletes every workspace's private temporary directories
// under the state directory that no running sandbox holds, for `agentbox
// cleanup`.
func RemoveTemps(stateDir string) (removed, kept []string) {
	root := agentdirs.TempRoot(stateDir)
	workspaces, _ := os.ReadDir(root)
	for _, w := range workspaces {
		if !w.IsDir() {
			continue
		}
		wdir := filepath.Join(root, w.Name())
		f, err := os.OpenFile(filepath.Join(wdir, tempLock), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		// Held exclusively, nobody can start using it; removing the
		// lock file with the rest makes a run that waited for it open
		// a fresh one (lockShared).
		if err == nil && removeTree(wdir) == nil {
			removed = append(removed, wdir)
		} else {
			kept = append(kept, wdir)
		}
		if f != nil {
			f.Close()
		}
	}
	os.Remove(root) // only when empty
	return removed, kept
}

// Roots are the paths the private temporary directories add to the
// writable roots of the Landlock layer and the connect supervisor: where
// the command sees them when they are mounted (remapped), else their host
// directories (degraded mode, where nothing can be mounted).
func (td *TempDirs) Roots(p *policy.Policy, remapped bool) []string {
	var out []string
	for _, t := range p.PrivateTemps() {
		r := t.Path
		if !remapped {
			r = td.Real[t.Dir]
		}
		if r != "" && fspath.InnermostRoot(r, out) == "" {
			out = append(out, r)
		}
	}
	return out
}

// Env returns env as the command's programs must see it for the private
// temporary directories. Remapped, each variable that named one names it
// as resolved (the private directory is shown there, not at a symlink's
// path); otherwise TMPDIR names the host directory standing in for
// $TMPDIR, or for /tmp, which the command cannot write.
func (td *TempDirs) Env(p *policy.Policy, env []string, remapped bool) []string {
	if !remapped {
		if dir := td.Real[p.TempDirFor()]; dir != "" {
			return replaceEnv(env, "TMPDIR="+dir)
		}
		return env
	}
	for _, t := range p.PrivateTemps() {
		if t.Env == "" {
			continue
		}
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok && k == t.Env && filepath.Clean(v) != t.Path {
				env = replaceEnv(env, t.Env+"="+t.Path)
				break
			}
		}
	}
	return env
}
