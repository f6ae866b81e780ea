package stdio

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use, for a command's
// stdout and stderr (or its diagnostics) written to one buffer by two
// copies at once. Its zero value is an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// Bytes returns what was written so far; as with bytes.Buffer, the slice
// is valid until the next write.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Bytes()
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
