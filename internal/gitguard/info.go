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
	size     int64
}

// changed reports whether the inode was written, renamed or made at or
// after t.
func (i info) changed(t time.Time) bool {
	return !i.ctime.Before(t) || i.hasBtime && !i.btime.Before(t)
}

// born reports whether the inode was made at or after t; without a birth
// time, whether it changed.
func (i info) born(t time.Time) bool {
	if i.hasBtime {
		return !i.btime.Before(t)
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
