// Package syncbuf is what is left of the buffer that moved to
// internal/stdio: an alias, for the one caller (internal/resident) that
// another branch edits at the same time. It goes with that caller's
// next import change.
package syncbuf

import "github.com/agentbox/agentbox/internal/stdio"

// Buffer is [stdio.Buffer].
type Buffer = stdio.Buffer
