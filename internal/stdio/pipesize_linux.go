package stdio

import (
	"os"

	"golang.org/x/sys/unix"
)

// setPipeSize asks for a pipe of size bytes; fs.pipe-max-size and the
// per-user limits may refuse, which leaves the default.
func setPipeSize(w *os.File, size int) {
	unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, size)
}
