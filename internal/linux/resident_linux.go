package linux

import "os"

// PassesStdio reports whether a lone run hands f to the command as it is
// (or reopens it from the sandbox's /dev): an anonymous pipe, a connected
// unix stream socket, or one of the sandbox's devices. Anything else a
// lone run relays or gives a pseudo-terminal (see classifyStdio).
func PassesStdio(f *os.File) bool { return passable(f) }
