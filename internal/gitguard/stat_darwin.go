package gitguard

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func openNoSymlinks(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW_ANY, 0)
}

func (d *dir) stat(name string) (info, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return info{}, &os.PathError{Op: "stat", Path: d.child(name), Err: err}
	}
	return infoOf(&st), nil
}

// infoOf: macOS keeps a birth time on every volume agentbox meets (APFS,
// HFS+), but its owner can set it (setattrlist), so the guard treats it as
// a hint only (see [info.born]); the change time cannot be set.
func infoOf(st *unix.Stat_t) info {
	return info{
		mode:     unixMode(uint32(st.Mode)),
		uid:      st.Uid,
		nlink:    uint64(st.Nlink),
		dev:      uint64(st.Dev),
		ino:      st.Ino,
		ctime:    time.Unix(st.Ctim.Unix()),
		btime:    time.Unix(st.Btim.Unix()),
		hasBtime: true,
		size:     st.Size,
	}
}

func chmodAt(fd int, name string, perm uint32) error {
	return unix.Fchmodat(fd, name, perm, unix.AT_SYMLINK_NOFOLLOW)
}

func (d *dir) touch(name string) error {
	now := unix.NsecToTimespec(time.Now().UnixNano())
	if err := unix.UtimesNanoAt(d.fd, name, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "touch", Path: d.child(name), Err: err}
	}
	return nil
}

// coarseNow: macOS stamps inode times from the fine clock.
func coarseNow() time.Time { return time.Now().Add(-time.Millisecond) }
