//go:build unix

package sandbox

import "syscall"

// linkCount is the number of names path's inode has (0 when unknown).
func linkCount(path string) uint64 {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return 0
	}
	return uint64(st.Nlink)
}
