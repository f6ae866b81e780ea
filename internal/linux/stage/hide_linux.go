package stage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// Scratch paths of the mask sources, in the scratch tmpfs that is the root
// while the sandbox's is assembled (mount_linux.go): the binds of them
// keep that file system alive after it is detached, and nothing but the
// binds, read-only, reaches it.
const (
	scratchHiddenFile = "/hidden-file"
	scratchHiddenDir  = "/hidden-dir"
)

var maskAttrs = uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC)

// makeMaskSources creates the empty file and directory a session's late
// masks are copies of (bindMaskTemplates).
func makeMaskSources() error {
	if err := os.WriteFile(scratchHiddenFile, nil, 0o444); err != nil {
		return err
	}
	if err := os.Chmod(scratchHiddenFile, 0o444); err != nil {
		return err
	}
	return os.Mkdir(scratchHiddenDir, 0o555)
}

// applyHides masks each hidden path beneath newRoot. A path the sandbox
// does not show (a private cache in place of the host's directory, a
// file gone since the policy was resolved) has nothing to hide; a symlink
// on the way means the tree changed under us, and fails.
func applyHides(hides []spec.Hide, pins []string) error {
	for _, p := range pins {
		fd, err := cloneOnto(newRoot, p, p, true, false)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("pinning %s, which holds a hidden path: %w", p, err)
		}
		unix.Close(fd)
	}
	for i, h := range hides {
		if err := applyHide(i, h); err != nil {
			return fmt.Errorf("hiding %s: %w", h.Path, err)
		}
	}
	return nil
}

func applyHide(i int, h spec.Hide) error {
	var st unix.Stat_t
	if err := unix.Lstat(newRoot+h.Path, &st); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	// Each mask is an inode of its own in the scratch file system, so
	// that an open of it names the hidden path (hidewatch_linux.go).
	src := fmt.Sprintf("/hidden-%d", i)
	if len(h.Reopen) == 0 || !isDir {
		var err error
		if isDir {
			err = os.Mkdir(src, 0o555)
		} else if err = os.WriteFile(src, nil, 0o444); err == nil {
			err = os.Chmod(src, 0o444) // whatever the umask
		}
		if err != nil {
			return err
		}
		return maskWith("/", src, h.Path, isDir)
	}
	// What stays readable, copied from the sandbox's view before the
	// mask covers it.
	open := func(r string) (int, error) { return openNoFollow(newRoot, r, unix.O_NOFOLLOW) }
	keep, err := keepReopened(h, newRoot, open)
	if err != nil {
		return err
	}
	defer closeKept(keep)
	// A directory of its own, with a mount point (or the link) for each
	// entry kept.
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	for _, k := range keep {
		p := filepath.Join(src, k.rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var err error
		switch {
		case k.link != "":
			err = os.Symlink(k.link, p)
		case k.dir:
			err = os.Mkdir(p, 0o755)
		default:
			err = os.WriteFile(p, nil, 0o444)
		}
		if err != nil {
			return err
		}
	}
	if err := maskWith("/", src, h.Path, true); err != nil {
		return err
	}
	return moveKept(keep, h.Path, open)
}

// maskWith binds src (beneath srcDir) read-only over path beneath
// newRoot.
func maskWith(srcDir, src, path string, dir bool) error {
	fd, err := cloneOnto(srcDir, src, path, false, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return setAttr(fd, path, maskAttrs, false)
}

// bindMaskTemplates shows the mask sources at their template paths in the
// sandbox's /dev (its tmpfs, still writable, made by buildDev), for a
// session's mounter to clone from.
func bindMaskTemplates(dev string) error {
	if err := os.WriteFile(dev+"/"+filepath.Base(hiddenFileTemplate), nil, 0o444); err != nil {
		return err
	}
	if err := os.Mkdir(dev+"/"+filepath.Base(hiddenDirTemplate), 0o555); err != nil {
		return err
	}
	if err := maskWith("/", scratchHiddenFile, hiddenFileTemplate, false); err != nil {
		return err
	}
	return maskWith("/", scratchHiddenDir, hiddenDirTemplate, true)
}

// ensureHidden, in a session's zygote, has the mounter mask each of
// hides that is not masked: a file a rule matches that appeared since
// the session began, or one replaced on the host (a rename over it takes
// its mask away in every namespace). A path is masked when it is on the
// file system of the mask templates.
func (z *zygote) ensureHidden(hides []spec.Hide) error {
	if len(hides) == 0 {
		return nil
	}
	var tmpl unix.Stat_t
	if err := unix.Stat(hiddenFileTemplate, &tmpl); err != nil {
		return &os.PathError{Op: "stat", Path: hiddenFileTemplate, Err: err}
	}
	var todo []spec.Hide
	for _, h := range hides {
		var st unix.Stat_t
		if err := unix.Lstat(h.Path, &st); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue // not in the sandbox: nothing to read
			}
			return &os.PathError{Op: "lstat", Path: h.Path, Err: err}
		}
		if st.Dev == tmpl.Dev {
			continue
		}
		z.lateMu.Lock()
		dev, late := z.lateMasks[h.Path]
		z.lateMu.Unlock()
		if late && st.Dev == dev {
			continue
		}
		todo = append(todo, h)
	}
	if len(todo) == 0 {
		return nil
	}
	if err := z.askMounter(mounterReq{Hides: todo}, nil); err != nil {
		return err
	}
	// Masks cloned from the template share its inode: only those on a
	// file system of their own say which path was opened.
	z.hidden.add(todo, &tmpl)
	// A mask on a file system of its own (maskLate) is known by its
	// device from now on: a mount's root whose device is not the
	// template's. Not whatever the path shows, which a rename on the
	// host may have made its file again since (recorded, it would be
	// taken for masked by every later command).
	for _, h := range todo {
		var st unix.Stat_t
		if unix.Lstat(h.Path, &st) == nil && st.Dev != tmpl.Dev && isMountRoot(h.Path, st.Dev) {
			z.lateMu.Lock()
			if z.lateMasks == nil {
				z.lateMasks = map[string]uint64{}
			}
			z.lateMasks[h.Path] = st.Dev
			z.lateMu.Unlock()
		}
	}
	return nil
}

// isMountRoot reports whether path (of device dev) is the root of a
// mount: by statx where the kernel says (Linux 5.8), else by its
// parent's being on another device.
func isMountRoot(path string, dev uint64) bool {
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, 0, &sx) == nil && sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	}
	var parent unix.Stat_t
	return unix.Lstat(filepath.Dir(path), &parent) == nil && parent.Dev != dev
}

// maskLate, in the mounter, masks h.Path with a copy of the template of
// its kind, and checks the mask took.
func maskLate(h spec.Hide) error {
	// Its directories first, as a lone run pins them: a mount point
	// already (an earlier command's pin, a writable root) is left.
	for _, p := range h.Pins {
		pfd, err := openStrict(p)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return err
		}
		var st unix.Statx_t
		err = unix.Statx(pfd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, 0, &st)
		if err == nil && (st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 || st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0) {
			var tree int
			tree, err = unix.OpenTree(pfd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
			if err == nil {
				err = unix.MoveMount(tree, "", pfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
				unix.Close(tree)
			}
		}
		unix.Close(pfd)
		if err != nil {
			return fmt.Errorf("pinning %s: %w", p, err)
		}
	}
	fd, err := openStrict(h.Path)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	// A mask of its own, so that the session's watch on it names the
	// path opened (hidewatch_linux.go): a directory is a tmpfs, a file
	// one on a tmpfs where the kernel lets a detached mount's file be
	// cloned (Linux 6.15 and later, it seems; before, the template's).
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return maskLateReopen(h, fd)
	}
	if err := maskLateFile(h, fd); !errors.Is(err, unix.EINVAL) {
		return err
	}
	tmpl := hiddenFileTemplate
	sfd, err := openStrict(tmpl)
	if err != nil {
		return err
	}
	tree, err := unix.OpenTree(sfd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	unix.Close(sfd)
	if err != nil {
		return &os.PathError{Op: "open_tree", Path: tmpl, Err: err}
	}
	defer unix.Close(tree)
	if err := setAttr(tree, h.Path, maskAttrs, false); err != nil {
		return err
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount", Path: h.Path, Err: err}
	}
	var tst, now unix.Stat_t
	if unix.Stat(tmpl, &tst) != nil || unix.Lstat(h.Path, &now) != nil || now.Dev != tst.Dev {
		return errors.New("the mask did not take (the path changed while it was made?)")
	}
	return nil
}

// maskLateFile, in the mounter, masks the file at fd (h.Path) with an
// empty read-only file on a tmpfs of its own. EINVAL says the kernel
// cannot clone the file out of the detached tmpfs.
func maskLateFile(h spec.Hide, fd int) error {
	// Its root, where the file is made, is never shown.
	mfd, err := newMaskTmpfs("0755")
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	f, err := unix.Openat(mfd, "m", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o444)
	if err != nil {
		return &os.PathError{Op: "making a mask", Path: h.Path, Err: err}
	}
	unix.Close(f)
	tree, err := unix.OpenTree(mfd, "m", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return err // EINVAL on a kernel that will not
	}
	defer unix.Close(tree)
	var want unix.Stat_t
	if err := unix.Fstat(tree, &want); err != nil {
		return err
	}
	if err := setAttr(tree, h.Path, maskAttrs, false); err != nil {
		return err
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount", Path: h.Path, Err: err}
	}
	var now unix.Stat_t
	if unix.Lstat(h.Path, &now) != nil || now.Dev != want.Dev || now.Ino != want.Ino {
		return errors.New("the mask did not take (the path changed while it was made?)")
	}
	return nil
}

// newMaskTmpfs returns a detached tmpfs, its root of mode, for a mask.
func newMaskTmpfs(mode string) (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, os.NewSyscallError("fsopen(tmpfs)", err)
	}
	defer unix.Close(fsfd)
	for k, v := range map[string]string{"mode": mode, "size": "64k"} {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return -1, os.NewSyscallError("fsconfig", err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, os.NewSyscallError("fsconfig(create)", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, os.NewSyscallError("fsmount", err)
	}
	return mfd, nil
}

// maskLateReopen, in the mounter, masks the directory at fd (h.Path)
// with a tmpfs of its own holding what stays readable (nothing for a
// directory hidden whole): the entries bound from what the sandbox shows
// there now, or recreated as the same links.
func maskLateReopen(h spec.Hide, fd int) error {
	keep, err := keepReopened(h, "", openStrict)
	if err != nil {
		return err
	}
	defer closeKept(keep)
	mode := "0755"
	if len(h.Reopen) == 0 {
		mode = "0555" // as the template: nothing may be made in it
	}
	mfd, err := newMaskTmpfs(mode)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	// The mount points (and links), made through the new file system's
	// root before it is attached.
	for _, k := range keep {
		dir := filepath.Dir(k.rel)
		if dir != "." {
			if err := MakeDirBeneath(fmt.Sprintf("/proc/self/fd/%d", mfd), dir); err != nil {
				return err
			}
		}
		var err error
		switch {
		case k.link != "":
			err = unix.Symlinkat(k.link, mfd, k.rel)
		case k.dir:
			err = unix.Mkdirat(mfd, k.rel, 0o755)
		default:
			var f int
			f, err = unix.Openat(mfd, k.rel, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o444)
			if err == nil {
				unix.Close(f)
			}
		}
		if err != nil {
			return &os.PathError{Op: "making a mount point", Path: k.rel, Err: err}
		}
	}
	if err := unix.MoveMount(mfd, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount", Path: h.Path, Err: err}
	}
	if err := moveKept(keep, h.Path, openStrict); err != nil {
		return err
	}
	// Read-only last: nothing may be added to the mask.
	return setAttr(mfd, h.Path, maskAttrs, false)
}

// kept is an entry of a hidden directory that stays readable (one of its
// Reopen paths): a link, made anew in the mask, or a detached clone of
// the mount tree the sandbox shows there, moved onto the mask's mount
// point for it.
type kept struct {
	rel  string // below the hidden directory
	tree int    // the clone (0 for a link)
	link string
	dir  bool
}

// keepReopened collects h's re-opened entries as the sandbox shows them
// at root+path, before the mask covers them; open opens root+path without
// following a link. A missing entry is skipped. The caller closes the
// clones (closeKept).
func keepReopened(h spec.Hide, root string, open func(path string) (int, error)) (keep []kept, err error) {
	defer func() {
		if err != nil {
			closeKept(keep)
			keep = nil
		}
	}()
	for _, r := range h.Reopen {
		rel := strings.TrimPrefix(r, h.Path+"/")
		if rel == r || rel == "" || slices.Contains(strings.Split(rel, "/"), "..") {
			return keep, fmt.Errorf("re-opened %s is not inside it", r)
		}
		var rst unix.Stat_t
		if err := unix.Lstat(root+r, &rst); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return keep, &os.PathError{Op: "lstat", Path: r, Err: err}
		}
		k := kept{rel: rel}
		if rst.Mode&unix.S_IFMT == unix.S_IFLNK {
			// The same link, made anew: it leads where the host's
			// leads, through the masks like any other path.
			if k.link, err = os.Readlink(root + r); err != nil {
				return keep, err
			}
		} else {
			fd, err := open(r)
			if err != nil {
				return keep, err
			}
			k.tree, err = unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
			unix.Close(fd)
			if err != nil {
				return keep, &os.PathError{Op: "open_tree", Path: r, Err: err}
			}
			k.dir = rst.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		keep = append(keep, k)
	}
	return keep, nil
}

// moveKept moves each clone of keep onto its mount point in the mask
// now at path, opened with open (which follows no link).
func moveKept(keep []kept, path string, open func(path string) (int, error)) error {
	for _, k := range keep {
		if k.tree <= 0 {
			continue
		}
		p := filepath.Join(path, k.rel)
		dfd, err := open(p)
		if err != nil {
			return err
		}
		err = unix.MoveMount(k.tree, "", dfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		unix.Close(dfd)
		if err != nil {
			return &os.PathError{Op: "move_mount", Path: p, Err: err}
		}
	}
	return nil
}

func closeKept(keep []kept) {
	for _, k := range keep {
		if k.tree > 0 {
			unix.Close(k.tree)
		}
	}
}

// Paths of the mask templates: every mask is a bind of one of them (or,
// for a directory that re-opens entries, of a directory of the same
// scratch file system), so a path is masked exactly when it is on their
// file system. A session's mounter clones them for the masks of a later
// command. They live in the sandbox's read-only /dev.
const (
	hiddenFileTemplate = "/dev/.agentbox-hidden"
	hiddenDirTemplate  = "/dev/.agentbox-hidden-dir"
)
