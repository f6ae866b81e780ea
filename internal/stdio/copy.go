package stdio

import (
	"io"
	"os"
	"sync"
)

// bufs are the copies' buffers: io.Copy would allocate one for each
// stream of each command.
var bufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyTo copies src into w with a pooled buffer. src's WriteTo is
// hidden (for a pipe it is io.Copy's allocation again); a ReadFrom of
// w's still serves.
func copyTo(w io.Writer, src *os.File) error {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	_, err := io.CopyBuffer(w, struct{ io.Reader }{src}, *bp)
	return err
}
