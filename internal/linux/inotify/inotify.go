// Package inotify decodes the events a Linux inotify descriptor queues
// (struct inotify_event records, as read(2) returns them) and drains a
// non-blocking descriptor of them, for agentbox's two watchers: the git
// guard's of writable roots and the stage's of hidden paths' masks.
package inotify

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// An Event is one inotify_event record.
type Event struct {
	Wd     int32  // the watch it is of; -1 for IN_Q_OVERFLOW
	Mask   uint32 // what happened (IN_* bits)
	Cookie uint32 // pairs an IN_MOVED_FROM with its IN_MOVED_TO
	// Name is the entry's name inside a watched directory, "" for an
	// event of the watched file or directory itself.
	Name string
}

// headerSize is the size of struct inotify_event without its name: wd,
// mask, cookie and len, 32 bits each.
const headerSize = 16

// nameMax is the longest name a Linux file system allows (NAME_MAX).
const nameMax = 255

// MaxEventSize is the size of the largest record the kernel queues: a
// read into a buffer at least this large always gets one whole event.
const MaxEventSize = headerSize + nameMax + 1

// ErrMalformed is what Parse answers for a buffer that is not a run of
// whole, well-formed records.
var ErrMalformed = errors.New("inotify: malformed event record")

// Parse hands each record of buf, the answer of one read(2) of an
// inotify descriptor, to fn, in order. The kernel returns whole records
// only, so a record cut short by the end of buf, a name longer than
// NAME_MAX or one without its terminating NUL is an error (wrapping
// ErrMalformed); the records before it have been handed to fn.
func Parse(buf []byte, fn func(Event)) error {
	for off := 0; off < len(buf); {
		rest := buf[off:]
		if len(rest) < headerSize {
			return fmt.Errorf("%w: %d bytes at offset %d, short of a header", ErrMalformed, len(rest), off)
		}
		ev := Event{
			Wd:     int32(binary.NativeEndian.Uint32(rest[0:4])),
			Mask:   binary.NativeEndian.Uint32(rest[4:8]),
			Cookie: binary.NativeEndian.Uint32(rest[8:12]),
		}
		n := binary.NativeEndian.Uint32(rest[12:16])
		// The kernel pads a name and its NUL to a multiple of the
		// header's size: NAME_MAX+1 (256) is already one.
		if n > nameMax+1 {
			return fmt.Errorf("%w: name length %d at offset %d", ErrMalformed, n, off)
		}
		if uint64(n) > uint64(len(rest)-headerSize) {
			return fmt.Errorf("%w: name length %d at offset %d runs past the %d bytes read", ErrMalformed, n, off, len(buf))
		}
		if n > 0 {
			raw := rest[headerSize : headerSize+int(n)]
			end := indexNUL(raw)
			if end < 0 {
				return fmt.Errorf("%w: name at offset %d without its NUL", ErrMalformed, off)
			}
			ev.Name = string(raw[:end])
		}
		off += headerSize + int(n)
		fn(ev)
	}
	return nil
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}
