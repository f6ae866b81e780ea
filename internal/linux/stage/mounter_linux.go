package stage

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/wire"

	"golang.org/x/sys/unix"
)

// A session's mounter binds, for each command, the placeholders the host
// made for it read-only over themselves in the session's mount namespace.
//
// Placeholders cannot live as long as a session: a placeholder left on the
// host between commands keeps the user from creating the name there
// (`git init` fails), and removing one on the host (rmdir, unlink) detaches
// every mount on it in every namespace, the session's too (Linux 3.18
// and later), after which the name is free for the session's next
// command to create. So the host makes them for each command and removes
// them when it ends, and each command's start request carries a
// descriptor of each: the mounter binds what is not bound yet before the
// command is forked.
//
// The zygote cannot do that itself: Landlock confines each of its threads
// (zygote_linux.go), and a Landlock domain refuses every change of mount
// topology. So before it restricts itself the zygote starts this small
// process, which keeps CAP_SYS_ADMIN in the session's user namespace and
// nothing else, serves only the zygote (a socketpair nobody else holds;
// the process is not dumpable), and dies with it (parent-death signal, and
// it lives in the session's pid namespace, whose init the zygote is). A
// command cannot reach it: the commands live in pid namespaces of their
// own below the session's, cannot see or signal it, and neither Landlock
// nor the capability check lets them trace or read it through /proc.
const (
	mounterValue = "mounter"
	mounterArg0  = "agentbox-mounter"
	mounterFD    = 3
)

// mounterReq is a mounter request: the held paths (one descriptor each,
// in order) to bind read-only, and the masks to make.
type mounterReq struct {
	Held  []string
	Hides []spec.Hide
}

// mountReply answers a mounter request.
type mountReply struct {
	Error string
}

// The tags of the mounter's messages (package wire).
const (
	tagMounterReq = 'M'
	tagMountReply = 'R'
)

func (r *mounterReq) append(b []byte) []byte {
	b = wire.AppendTag(b, tagMounterReq)
	return spec.AppendHides(wire.AppendStrings(b, r.Held), r.Hides)
}

func (r *mounterReq) decode(b []byte) error {
	d := wire.NewDecoder(b)
	d.Tag(tagMounterReq)
	r.Held = d.ReadStrings()
	r.Hides = spec.ReadHides(d)
	return d.End()
}

func (r *mountReply) append(b []byte) []byte {
	return wire.AppendString(wire.AppendTag(b, tagMountReply), r.Error)
}

func (r *mountReply) decode(b []byte) error {
	d := wire.NewDecoder(b)
	d.Tag(tagMountReply)
	r.Error = d.ReadString()
	return d.End()
}

func isMounter() bool {
	return len(os.Args) > 0 && os.Args[0] == mounterArg0 && os.Getenv(spec.StageEnv) == mounterValue
}

// startMounter starts the session's mounter from the zygote, which still
// holds its capabilities (a caller other than root passes them on as
// ambient ones, see initSysProcAttr), and returns the zygote's end of
// their socketpair.
func startMounter() (int, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socketpair", err)
	}
	defer unix.Close(pair[1])
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(pair[0])
		return -1, &os.PathError{Op: "open", Path: "/dev/null", Err: err}
	}
	defer unix.Close(null)
	_, err = syscall.ForkExec("/proc/self/exe", []string{mounterArg0}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{spec.StageEnv + "=" + mounterValue, "GOMAXPROCS=1"},
		Files: []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(pair[1])},
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		unix.Close(pair[0])
		return -1, fmt.Errorf("starting the session's mounter: %w", err)
	}
	// Not waited for: it lives as long as the session, whose end (the
	// zygote's exit, as PID 1) kills it.
	return pair[0], nil
}

// runMounter serves the zygote's requests until it goes away. It never
// returns.
func runMounter() {
	// Nothing in the sandbox may read our memory or descriptors, and
	// nothing but the mounts may be done with what we hold.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		os.Exit(1)
	}
	if err := thisThread(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		os.Exit(1)
	}
	if err := keepOnlyNewPIDCap(); err != nil {
		os.Exit(1)
	}
	buf := make([]byte, spec.MaxPacket)
	oob := make([]byte, unix.CmsgSpace(spec.MaxHeld*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(mounterFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			os.Exit(0) // the zygote is gone
		}
		fds := scm.Rights(oob[:oobn])
		var req mounterReq
		var rep mountReply
		switch {
		case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
			rep.Error = "request truncated"
		case req.decode(buf[:n]) != nil:
			rep.Error = "malformed request"
		case len(req.Held) != len(fds):
			rep.Error = fmt.Sprintf("%d paths but %d descriptors", len(req.Held), len(fds))
		default:
			for i, p := range req.Held {
				if err := bindHeld(p, fds[i]); err != nil {
					rep.Error = err.Error()
					break
				}
			}
			if rep.Error == "" {
				for _, h := range req.Hides {
					if err := maskLate(h); err != nil {
						rep.Error = fmt.Sprintf("hiding %s: %v", h.Path, err)
						break
					}
				}
			}
		}
		scm.CloseAll(fds)
		if scm.Send(mounterFD, rep.append(nil), nil) != nil {
			os.Exit(0)
		}
	}
}

// bindHeld makes path, which must be the inode held is (the host's
// descriptor of what it holds there), read-only over itself in this
// mount namespace, unless it is already. It looks the path up itself,
// without following symlinks (the host's descriptor belongs to another
// mount namespace, where open_tree cannot clone from), and checks once
// the mount is made that the name still leads to it: a swap in between
// by someone who can write the parent fails the command's start.
func bindHeld(path string, held int) error {
	var want unix.Stat_t
	if err := unix.Fstat(held, &want); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	fd, done, err := openHeld(path, &want, openStrict)
	if err != nil || done {
		return err
	}
	defer unix.Close(fd)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return &os.PathError{Op: "open_tree", Path: path, Err: err}
	}
	defer unix.Close(tree)
	if err := setAttr(tree, path, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, true); err != nil {
		return err
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "move_mount", Path: path, Err: err}
	}
	check, done, err := openHeld(path, &want, openStrict)
	if err != nil {
		return err
	}
	if !done {
		unix.Close(check)
		return fmt.Errorf("protected path %s: its read-only mount did not take", path)
	}
	return nil
}

// openStrict opens path O_PATH with no symlink on the way or at the end.
func openStrict(path string) (int, error) { return openNoFollow("/", path, unix.O_NOFOLLOW) }

// openPlain opens path O_PATH with no symlink at the end, for a command's
// thread, whose seccomp filter refuses openat2: a symlink on the way leads
// the command where it leads this lookup, so finding the held inode bound
// read-only there protects what the command reaches by the path.
func openPlain(path string) (int, error) {
	fd, err := unix.Openat(unix.AT_FDCWD, path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "openat", Path: path, Err: err}
	}
	return fd, nil
}

// boundAlready reports whether path is already held's inode, bound
// read-only in this mount namespace (by this session's mounter for an
// earlier command: a bind follows its directory through a rename, see
// Pool), so that the mounter need not be asked.
func boundAlready(path string, held int) bool {
	var want unix.Stat_t
	if unix.Fstat(held, &want) != nil {
		return false
	}
	fd, done, err := openHeld(path, &want, openPlain)
	if err == nil && !done {
		unix.Close(fd)
	}
	return err == nil && done
}

// openHeld opens path with open and checks it is the inode want
// describes. done reports that it is already bound read-only here (the
// root of a read-only mount): then nothing is left open.
func openHeld(path string, want *unix.Stat_t, open func(string) (int, error)) (fd int, done bool, err error) {
	fd, err = open(path)
	if err != nil {
		return -1, false, fmt.Errorf("protected path %s changed while starting (run again): %w", path, err)
	}
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &st); err != nil {
		unix.Close(fd)
		return -1, false, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if unix.Mkdev(st.Dev_major, st.Dev_minor) != want.Dev || st.Ino != want.Ino {
		unix.Close(fd)
		return -1, false, fmt.Errorf("protected path %s was replaced while starting (by a command that can write its directory?); run again", path)
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		unix.Close(fd)
		return -1, false, fmt.Errorf("protected path %s: the kernel does not say which paths are mount points (statx STATX_ATTR_MOUNT_ROOT, Linux 5.8)", path)
	}
	if st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(fd, &fs); err != nil {
			unix.Close(fd)
			return -1, false, &os.PathError{Op: "fstatfs", Path: path, Err: err}
		}
		if fs.Flags&unix.ST_RDONLY != 0 {
			unix.Close(fd)
			return -1, true, nil
		}
	}
	return fd, false, nil
}

// bindHeldPaths asks the session's mounter to bind paths (with fds, the
// host's descriptors of what is at them) and waits for its answer. One
// request at a time: the socket is shared by every command's thread.
func (z *zygote) bindHeldPaths(paths []string, fds []int) error {
	return z.askMounter(mounterReq{Held: paths}, fds)
}

// askMounter sends the session's mounter r (with fds, one per held path)
// and waits for its answer.
func (z *zygote) askMounter(r mounterReq, fds []int) error {
	if z.mounter < 0 {
		return errors.New("the session has no mounter for its placeholders")
	}
	z.mountMu.Lock()
	defer z.mountMu.Unlock()
	if err := scm.Send(z.mounter, r.append(nil), fds); err != nil {
		return fmt.Errorf("asking the session's mounter: %w", err)
	}
	var buf [4096]byte
	for {
		n, _, _, _, err := unix.Recvmsg(z.mounter, buf[:], nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return fmt.Errorf("the session's mounter is gone (%v)", err)
		}
		var rep mountReply
		if err := rep.decode(buf[:n]); err != nil {
			return fmt.Errorf("the session's mounter: %w", err)
		}
		if rep.Error != "" {
			return errors.New(rep.Error)
		}
		return nil
	}
}
