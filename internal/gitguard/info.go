package gitguard

import (
	"io/fs"
	"time"
)

// info is what the guard knows of one inode. Its change time is the
// kernel's: a command can set a file's access and modification times, but
// not its change time, which moves to the present on every write, rename,
// chmod or link of the inode, and the present cannot be moved back by a
// process without CAP_SYS_TIME in the host's namespace. The birth time is
// set once, when the inode is made.
type info struct {
	mode     fs.FileMode
	uid      uint32
	nlink    uint64
	dev, ino uint64
	ctime    time.Time
	btime    time.Time
	hasBtime bool
	// mtime and atime only tell how fine the file system's clock is
	// (zero where the platform does not give them).
	mtime, atime time.Time
	size         int64
}

// changed reports whether the inode was written, renamed or made at or
// after t. A file system that keeps times in whole seconds (ext4 with
// 128-byte inodes, FAT, some network file systems) stamps a change made
// after t, but within t's second, with a time before t: t is first
// rounded down to the granularity of the inode's own times.
func (i info) changed(t time.Time) bool {
	t = floorTo(t, i.granularity())
	return !i.ctime.Before(t) || i.hasBtime && !i.btime.Before(t)
}

// granularities are the steps file systems keep inode times in, coarsest
// first (FAT's two seconds, whole seconds, exFAT's 10 ms, UDF's 1 µs,
// NTFS's and CIFS's 100 ns).
var granularities = []time.Duration{2 * time.Second, time.Second, 100 * time.Millisecond, 10 * time.Millisecond, time.Millisecond, time.Microsecond, 100, 10, 1}

// granularity is the coarsest step that every one of the inode's times
// is a multiple of. Every time a file system stamps is a multiple of its
// own step, so this is never finer than the file system's (it is coarser
// only by chance, which makes a check count a little more as changed).
func (i info) granularity() time.Duration {
	g := granularities[0]
	for _, t := range []time.Time{i.ctime, i.btime, i.mtime, i.atime} {
		if t.IsZero() {
			continue
		}
		n := t.UnixNano()
		for _, c := range granularities {
			if n%int64(c) == 0 {
				g = min(g, c)
				break
			}
		}
	}
	return g
}

// floorTo rounds t down to a multiple of g.
func floorTo(t time.Time, g time.Duration) time.Time {
	if g <= 1 {
		return t
	}
	n := t.UnixNano()
	return time.Unix(0, n-((n%int64(g))+int64(g))%int64(g))
}

// born reports whether the inode was made at or after t; without a birth
// time, whether it changed.
func (i info) born(t time.Time) bool {
	if i.hasBtime {
		return !i.btime.Before(floorTo(t, i.granularity()))
	}
	return i.changed(t)
}

// odd reports whether the inode is of a type git never makes in a git
// directory, and would write through or block on (a symlink, FIFO,
// socket or device).
func (i info) odd() bool {
	return i.mode&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeIrregular) != 0
}

// Identity names one inode for the guard's memory of what it moved aside.
type Identity struct {
	Dev, Ino uint64
	Btime    int64 // UnixNano; the change time where there is no birth time
}

func (i info) identity() Identity {
	t := i.ctime
	if i.hasBtime {
		t = i.btime
	}
	return Identity{Dev: i.dev, Ino: i.ino, Btime: t.UnixNano()}
}
