//go:build linux || darwin

package sandbox

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/policy"
)

// newGitlinkGuard is policy.NewGitlinkGuard with this platform's file
// times, which the guard needs to make git distrust the index entries of
// files the command changed.
func newGitlinkGuard(pol *policy.Policy) *policy.GitlinkGuard {
	g := policy.NewGitlinkGuard(pol)
	if g != nil {
		g.Stamps = &policy.GitStamps{ChangedSince: changedSince, Touch: touchNoFollow}
	}
	return g
}

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
