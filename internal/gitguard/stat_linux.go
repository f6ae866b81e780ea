package gitguard

import (
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func openNoSymlinks(path string) (int, error) {
	return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
}

const statxMask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_INO | unix.STATX_CTIME | unix.STATX_BTIME | unix.STATX_MTIME | unix.STATX_ATIME | unix.STATX_SIZE | unix.STATX_NLINK | unix.STATX_UID

// stat describes name in d without following a symlink.
func (d *dir) stat(name string) (info, error) {
	var st unix.Statx_t
	if err := unix.Statx(d.fd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT, statxMask, &st); err != nil {
		return info{}, &os.PathError{Op: "stat", Path: d.child(name), Err: err}
	}
	return infoOf(&st), nil
}

func infoOf(st *unix.Statx_t) info {
	i := info{
		mode:  unixMode(uint32(st.Mode)),
		uid:   st.Uid,
		nlink: uint64(st.Nlink),
		dev:   unix.Mkdev(st.Dev_major, st.Dev_minor),
		ino:   st.Ino,
		ctime: time.Unix(st.Ctime.Sec, int64(st.Ctime.Nsec)),
		size:  int64(st.Size),
		mtime: time.Unix(st.Mtime.Sec, int64(st.Mtime.Nsec)),
		atime: time.Unix(st.Atime.Sec, int64(st.Atime.Nsec)),
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		i.btime, i.hasBtime = time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), true
	}
	return i
}

// chmodAt sets the mode of name in the directory fd, refusing a symlink
// (whose mode is not its own: chmod would follow it). Linux has no
// fchmodat with AT_SYMLINK_NOFOLLOW before 6.6, so the inode is reached
// through an O_PATH descriptor's /proc link.
func chmodAt(fd int, name string, perm uint32) error {
	p, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return errors.New("is a symlink")
	}
	return unix.Chmod(procFD(p), perm)
}

// touch sets name's access and modification times to now, not following
// a symlink.
func (d *dir) touch(name string) error {
	now := unix.NsecToTimespec(time.Now().UnixNano())
	if err := unix.UtimesNanoAt(d.fd, name, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "touch", Path: d.child(name), Err: err}
	}
	return nil
}

// coarseNow is the clock the kernel stamps inode times from (at jiffy
// granularity it may lag the fine clock by a tick): a window that starts
// at it includes every change made after.
func coarseNow() time.Time {
	var ts unix.Timespec
	fine := time.Now()
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return fine.Add(-20 * time.Millisecond)
	}
	c := time.Unix(ts.Unix())
	if c.After(fine) {
		return fine
	}
	return c
}

// procFD is the /proc path through which a descriptor's own inode can be
// changed by name (chmod of an O_PATH descriptor).
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
