package stage

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// cacheMountError is a tool cache that could not be mounted. It
// deliberately does not unwrap to the errno: an EPERM here is not a
// missing user namespace (which RunInit recognises by EPERM), and the
// message must name the cache and the way out.
type cacheMountError struct {
	m   spec.CacheMount
	err error
}

func (e *cacheMountError) Error() string {
	what := "overlay"
	if e.m.Lower == "" {
		what = "private directory"
	}
	return fmt.Sprintf("tool cache %s: mounting the %s at %s failed: %v; set [sandbox_workspace_write] tool_caches = \"private\" (fresh caches) or \"off\" (read-only caches)",
		e.m.Name, what, e.m.Target, e.err)
}

// mountCaches mounts the tool caches (the workspace's private directory
// first, then the overlays), after the read-only carve-outs: the
// layers live in agentbox's state directory, which is one of them, and a
// cache may lie inside a writable root. The upper layers stay read-only at
// their own path; the command writes them only through the overlay.
// It returns the variables (NAME=value) that point a tool at its private
// cache where the kernel refused the overlay.
func mountCaches(sp *spec.Spec) (fallbackEnv []string, err error) {
	// Building an overlay costs the kernel several milliseconds of
	// probing in the upper file system; build them side by side (the
	// threads share the init stage's namespaces and capabilities), then
	// attach them in order.
	type built struct {
		fd  int
		err error
	}
	res := make([]built, len(sp.FS.Caches))
	var wg sync.WaitGroup
	for i, m := range sp.FS.Caches {
		if m.Lower == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd, err := makeOverlay(m)
			res[i] = built{fd, err}
		}()
	}
	wg.Wait()
	defer func() {
		for _, r := range res {
			if r.fd > 0 {
				unix.Close(r.fd)
			}
		}
	}()
	for i, m := range sp.FS.Caches {
		var err error
		if m.Lower != "" {
			err = res[i].err
			if err == nil {
				err = attach(res[i].fd, m.Target)
			}
			if err != nil && m.Fallback != "" && m.FallbackEnv != "" {
				// Overlays are the default wherever they work; where the
				// kernel refuses one, a private cache still keeps the
				// host's cache out of reach.
				fmt.Fprintf(os.Stderr, "agentbox: tool cache %s: %v; using a private cache instead (%s)\n", m.Name, err, m.FallbackEnv)
				// The private directory is already bound (it comes
				// first in the plan); the tool only needs pointing at it.
				fallbackEnv = append(fallbackEnv, m.FallbackEnv)
				continue
			}
		} else {
			var fd int
			fd, err = cloneOnto(oldRoot, m.Upper, m.Target, false, false)
			if err == nil {
				err = setAttr(fd, m.Target, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false)
				unix.Close(fd)
			}
		}
		if err != nil {
			return nil, &cacheMountError{m, err}
		}
	}
	return fallbackEnv, nil
}

// makeOverlay builds a detached overlay of the host's cache (lower, never
// written) and the per-workspace upper layer.
// Each layer is opened with RESOLVE_NO_SYMLINKS and handed to overlayfs as
// a /proc/self/fd path, so a layer swapped for a symlink after the policy
// resolved it fails instead of redirecting the mount. userxattr makes
// overlayfs keep its bookkeeping in user.* xattrs, which an unprivileged
// user namespace may set (Linux 5.11 and later).
func makeOverlay(m spec.CacheMount) (int, error) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	layer := func(p string) (string, error) {
		fd, err := openNoFollow(oldRoot, p, unix.O_DIRECTORY)
		if err != nil {
			return "", err
		}
		fds = append(fds, fd)
		return fmt.Sprintf("%s/proc/self/fd/%d", oldRoot, fd), nil
	}
	lower, err := layer(m.Lower)
	if err != nil {
		return -1, err
	}
	upper, err := layer(m.Upper)
	if err != nil {
		return -1, err
	}
	work, err := layer(m.Work)
	if err != nil {
		return -1, err
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, &os.SyscallError{Syscall: "fsopen(overlay)", Err: err}
	}
	fds = append(fds, fsfd)
	for _, kv := range [][2]string{{"lowerdir", lower}, {"upperdir", upper}, {"workdir", work}, {"userxattr", ""}} {
		if kv[1] == "" {
			err = unix.FsconfigSetFlag(fsfd, kv[0])
		} else {
			err = unix.FsconfigSetString(fsfd, kv[0], kv[1])
		}
		if err != nil {
			return -1, &os.SyscallError{Syscall: "fsconfig(" + kv[0] + ")", Err: err}
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, &os.SyscallError{Syscall: "fsconfig(create)", Err: err}
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, &os.SyscallError{Syscall: "fsmount", Err: err}
	}
	return mfd, nil
}

// attach moves the detached mount mfd onto target (beneath newRoot).
func attach(mfd int, target string) error {
	dfd, err := openNoFollow(newRoot, target, unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.MoveMount(mfd, "", dfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount", Path: target, Err: err}
	}
	return nil
}

// ReplaceEnv returns env with kv's variable set to kv's value.
func ReplaceEnv(env []string, kv string) []string {
	name, _, _ := strings.Cut(kv, "=")
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); !ok || k != name {
			out = append(out, e)
		}
	}
	return append(out, kv)
}
