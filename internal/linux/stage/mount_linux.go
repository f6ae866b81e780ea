package stage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// Paths used while the new root is built. The scratch tmpfs is mounted on
// /tmp and becomes the root for a moment: the host root then sits at
// /oldroot and the sandbox's root is assembled at /newroot.
const (
	scratch = "/tmp"
	oldRoot = "/oldroot"
	newRoot = "/newroot"
)

// procReadOnly are the parts of /proc that change the whole machine.
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}

// openNoFollow opens path (absolute) beneath dir as an O_PATH fd, refusing
// any symlink on the way: the policy resolved every path already, so a
// symlink here means the tree changed under us (a swap race, as in runc's
// CVE-2021-30465) and we fail closed.
func openNoFollow(dir, path string, flags uint64) (int, error) {
	rel := strings.TrimPrefix(path, "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Join(dir, rel), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, &os.PathError{Op: "openat2", Path: path, Err: err}
	}
	return fd, nil
}

// cloneOnto makes a detached copy of the mount tree at src (beneath srcDir)
// and attaches it at dst (beneath newRoot). recursive copies submounts too.
// It returns the fd of the new mount for setting attributes.
func cloneOnto(srcDir, src, dst string, recursive, link bool) (int, error) {
	var nofollow uint64
	treeFlags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH)
	if recursive {
		treeFlags |= unix.AT_RECURSIVE
	}
	if link {
		nofollow = unix.O_NOFOLLOW
	}
	sfd, err := openNoFollow(srcDir, src, nofollow)
	if err != nil {
		return -1, err
	}
	defer unix.Close(sfd)
	tree, err := unix.OpenTree(sfd, "", treeFlags)
	if err != nil {
		return -1, &os.PathError{Op: "open_tree", Path: src, Err: err}
	}
	dfd := sfd
	if srcDir != newRoot || src != dst {
		// A pin or carve-out goes back onto the path it was copied
		// from, which sfd already holds.
		if dfd, err = openNoFollow(newRoot, dst, nofollow); err != nil {
			unix.Close(tree)
			return -1, err
		}
		defer unix.Close(dfd)
	}
	if err := unix.MoveMount(tree, "", dfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		unix.Close(tree)
		return -1, &os.PathError{Op: "move_mount", Path: dst, Err: err}
	}
	return tree, nil
}

// MakeDirBeneath creates path (absolute) beneath dir, and each missing
// directory above it, one component at a time through descriptors,
// following no symlink: the directories lie in a private temporary
// directory that the workspace's other sandboxes may be writing. An
// existing directory is left as it is; anything else on the way fails.
func MakeDirBeneath(dir, path string) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer func() { unix.Close(fd) }()
	for _, name := range strings.Split(strings.Trim(path, "/"), "/") {
		if name == "" {
			continue
		}
		how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}
		next, err := unix.Openat2(fd, name, how)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return &os.PathError{Op: "mkdirat", Path: path, Err: err}
			}
			next, err = unix.Openat2(fd, name, how)
		}
		if err != nil {
			return &os.PathError{Op: "openat2", Path: path, Err: err}
		}
		unix.Close(fd)
		fd = next
	}
	return nil
}

// makeFileBeneath creates an empty file at path beneath dir, its
// directory made already, unless something is there: a mount point for a
// file. It follows no symlink.
func makeFileBeneath(dir, path string) error {
	parent := filepath.Dir(path)
	pfd, err := openNoFollow(dir, parent, unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, filepath.Base(path), unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o400)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "openat", Path: path, Err: err}
	}
	return unix.Close(fd)
}

func setAttr(fd int, path string, set uint64, recursive bool) error {
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(fd, "", flags, &unix.MountAttr{Attr_set: set}); err != nil {
		return &os.PathError{Op: "mount_setattr", Path: path, Err: err}
	}
	return nil
}

// buildRoot assembles the sandbox's filesystem at /newroot and switches to
// it. The order matters and each step says why. It returns the variables
// the command needs for tool caches that fell back to private directories
// (mountCaches).
func buildRoot(sp *spec.Spec) (cacheEnv []string, err error) {
	// Nothing we mount may leak back to the host, and host mount events
	// must not appear inside with their own (possibly writable) flags.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, &os.SyscallError{Syscall: "mount(MS_PRIVATE)", Err: err}
	}
	if err := unix.Mount("agentbox", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=64k"); err != nil {
		return nil, &os.PathError{Op: "mount tmpfs", Path: scratch, Err: err}
	}
	for _, d := range []string{scratch + oldRoot, scratch + newRoot} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	// Make the scratch tmpfs the root so the host's whole tree, /tmp
	// included, is reachable under /oldroot without anything covering it.
	if err := unix.PivotRoot(scratch, scratch+oldRoot); err != nil {
		return nil, &os.PathError{Op: "pivot_root", Path: scratch, Err: err}
	}
	if err := unix.Chdir("/"); err != nil {
		return nil, err
	}

	// 1. The host, read-only and nosuid, as the base layer.
	fd, err := cloneOnto(oldRoot, "/", "/", true, false)
	if err != nil {
		return nil, fmt.Errorf("binding the host root: %w", err)
	}
	err = setAttr(fd, "/", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, true)
	unix.Close(fd)
	if err != nil {
		return nil, err
	}

	// 2. The plan: writable roots, pins, then read-only carve-outs. Sources
	// of writable roots come from the host (/oldroot); pins and carve-outs
	// copy what the sandbox already shows, submounts included.
	for _, m := range sp.FS.Mounts {
		var fd int
		var err error
		switch m.Kind {
		case spec.BindWritable:
			fd, err = cloneOnto(oldRoot, m.Path, m.Path, true, false)
			if err == nil {
				err = setAttr(fd, m.Path, unix.MOUNT_ATTR_NOSUID, true)
			}
		case spec.Pin:
			fd, err = cloneOnto(newRoot, m.Path, m.Path, true, false)
		case spec.BindReadOnly:
			fd, err = cloneOnto(newRoot, m.Path, m.Path, true, false)
			if err == nil {
				err = setAttr(fd, m.Path, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, true)
			}
		case spec.PinLink:
			fd, err = cloneOnto(newRoot, m.Path, m.Path, false, true)
		case spec.BindPrivate:
			// Not recursive: the private directory is agentbox's own,
			// and nothing mounted on the host below it belongs there.
			fd, err = cloneOnto(oldRoot, m.Source, m.Path, false, false)
			if err == nil {
				err = setAttr(fd, m.Path, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false)
			}
		case spec.MakeDir:
			err = MakeDirBeneath(newRoot, m.Path)
		case spec.MakeFile:
			err = makeFileBeneath(newRoot, m.Path)
		case spec.BindHost:
			fd, err = cloneOnto(oldRoot, m.Path, m.Path, true, false)
			if err == nil {
				err = setAttr(fd, m.Path, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, true)
			} else if errors.Is(err, unix.ENOENT) {
				// Gone from the host (a listed socket whose daemon is
				// not running): nothing of the host's to show there.
				err = nil
			}
		default:
			err = fmt.Errorf("unknown mount kind %q", m.Kind)
		}
		if fd > 0 {
			unix.Close(fd)
		}
		if err != nil {
			return nil, fmt.Errorf("%s mount of %s: %w", m.Kind, m.Path, err)
		}
	}

	if cacheEnv, err = mountCaches(sp); err != nil {
		return nil, err
	}
	// The sandbox's own resolver files, over whatever the plan and the
	// caches left at their paths.
	if err := bindEtc(sp.FS.Etc); err != nil {
		return nil, err
	}
	// The masks over hidden paths, last of the host's paths, so that no
	// bind above (a writable root holding one, a tool cache's overlay)
	// shows the hidden bytes again.
	if err := makeMaskSources(); err != nil {
		return nil, fmt.Errorf("hiding secrets: %w", err)
	}
	if err := applyHides(sp.FS.Hides, sp.FS.HidePins); err != nil {
		return nil, err
	}

	// /sys stays read-only even under a writable root that covers it
	// (`-C /`): it holds host-wide kernel knobs, like /proc/sys.
	if fd, err := cloneOnto(newRoot, "/sys", "/sys", true, false); err == nil {
		err = setAttr(fd, "/sys", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, true)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("making /sys read-only: %w", err)
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("making /sys read-only: %w", err)
	}

	// 3. A /proc for the new pid namespace: the host's would show (and
	// let the command signal or inspect) every process on the machine.
	if err := unix.Mount("proc", newRoot+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, &os.PathError{Op: "mount proc", Path: "/proc", Err: err}
	}
	// The kernel checks writes to sysctls by uid alone: uid 0 inside the
	// sandbox is the host's root when agentbox runs as root, and without
	// Landlock nothing else would stop `echo '|/tmp/x' >
	// /proc/sys/kernel/core_pattern`. Make the host-wide knobs read-only,
	// as container runtimes do.
	for _, p := range procReadOnly {
		if _, err := os.Lstat(newRoot + p); err != nil {
			continue // not in this kernel's /proc
		}
		fd, err := cloneOnto(newRoot, p, p, true, false)
		if err == nil {
			err = setAttr(fd, p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, true)
			unix.Close(fd)
		}
		if err != nil {
			return nil, fmt.Errorf("making %s read-only: %w", p, err)
		}
	}
	// 4. A private /dev: only harmless devices, a fresh devpts instance and
	// a private /dev/shm so shared-memory writes never reach the host.
	if err := buildDev(); err != nil {
		return nil, fmt.Errorf("building /dev: %w", err)
	}

	// 5. Switch to the new root and drop the old one entirely: nothing of
	// the unfiltered host tree may stay reachable.
	if err := unix.Chdir(newRoot); err != nil {
		return nil, err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return nil, &os.PathError{Op: "pivot_root", Path: newRoot, Err: err}
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return nil, &os.PathError{Op: "umount", Path: "old root", Err: err}
	}
	return cacheEnv, unix.Chdir("/")
}

func buildDev() error {
	dev := newRoot + "/dev"
	if err := unix.Mount("agentbox-dev", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return &os.PathError{Op: "mount tmpfs", Path: "/dev", Err: err}
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := os.WriteFile(dev+"/"+n, nil, 0o666); err != nil {
			return err
		}
		fd, err := cloneOnto(oldRoot, "/dev/"+n, "/dev/"+n, false, false)
		if err != nil {
			return err
		}
		// Read-only binds: these are the host's device nodes, and as
		// their owner (root runs as uid 0) the command could otherwise
		// chmod or touch the host's /dev/null. Opening a device for
		// writing does not need a writable mount.
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC})
		unix.Close(fd)
		if err != nil {
			return &os.PathError{Op: "mount_setattr(ro)", Path: "/dev/" + n, Err: err}
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return &os.PathError{Op: "mount devpts", Path: "/dev/pts", Err: err}
	}
	if err := unix.Mount("agentbox-shm", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return &os.PathError{Op: "mount tmpfs", Path: "/dev/shm", Err: err}
	}
	if err := bindMaskTemplates(dev); err != nil {
		return fmt.Errorf("mask templates: %w", err)
	}
	links := [][2]string{
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"},
		{"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], dev+"/"+l[1]); err != nil {
			return err
		}
	}
	// The tmpfs itself becomes read-only: nothing may be added to /dev.
	if err := unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return &os.PathError{Op: "remount ro", Path: "/dev", Err: err}
	}
	return nil
}
