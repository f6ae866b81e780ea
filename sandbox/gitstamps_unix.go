//go:build linux || darwin

package sandbox

import (
	"time"

	"golang.org/x/sys/unix"
)

// changedSince reports whether path's inode changed (ctime, which a command
// cannot set back) at or after t; an error counts as changed.
func changedSince(path string, t time.Time) bool {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return true
	}
	return !time.Unix(st.Ctim.Unix()).Before(t)
}

func touchNoFollow(path string) error {
	now := unix.NsecToTimespec(time.Now().UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
}
