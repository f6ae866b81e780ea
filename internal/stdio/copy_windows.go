package stdio

import (
	"io"
	"os"
)

// needStop: a Windows input copy ends when its pipe is closed; there is
// nothing to poll.
func (r *Relay) needStop() error { return nil }

func copyIn(dst *os.File, src io.Reader, _ *os.File) { io.Copy(dst, src) }

func copyOut(w io.Writer, src *os.File) error { return copyTo(w, src) }

// sameFile: a console (the only file relayed on Windows) has no
// identity to compare; only the same writer shares a pipe.
func sameFile(a, b any) bool { return false }
