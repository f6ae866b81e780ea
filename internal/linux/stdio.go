package linux

import "github.com/agentbox/agentbox/internal/linux/spec"

// How a standard stream the caller hands agentbox as an open file reaches
// the command. A descriptor the command inherits carries its inode and its
// mount with it: through /proc/self/fd/N the command can chmod, chown (as
// the owner), utimes and setxattr whatever file or terminal it names, and
// neither the read-only mounts nor Landlock cover metadata of an inode
// reached that way. So only descriptors whose inode nobody else looks at
// are passed through; everything else is relayed by agentbox.

// stdioKind is the treatment of one standard stream.
type stdioKind int

const (
	// stdioPass hands the descriptor to the command unchanged.
	stdioPass stdioKind = iota
	// stdioCopy gives the command a pipe and copies between it and the
	// caller's file in agentbox, which keeps the file's own open file
	// description (its offset, O_APPEND and all).
	stdioCopy
	// stdioTTY gives the command a pseudo-terminal the sandbox owns and
	// relays between it and the caller's terminal.
	stdioTTY
)

// stdioFacts is what fstat and friends say about a descriptor.
type stdioFacts struct {
	mode uint32 // st_mode & S_IFMT
	// pipefs: an anonymous pipe (pipe(2)), not a FIFO on a filesystem.
	pipefs bool
	// connectedUnixStream: an AF_UNIX stream or seqpacket socket with a
	// peer (a socketpair, as Node's child_process uses, or an accepted
	// connection).
	connectedUnixStream bool
	tty                 bool
	rdev                uint64
}

// File type bits of st_mode, as in <sys/stat.h>; the same on every Linux
// architecture.
const (
	sIFMT   = 0o170000
	sIFIFO  = 0o010000
	sIFCHR  = 0o020000
	sIFSOCK = 0o140000
)

// classifyStdio decides how a stream reaches the command.
//
//   - An anonymous pipe or a connected unix stream socket passes: its inode
//     lives in pipefs or sockfs, where nobody opens it by name, and a
//     connected stream socket reaches only its peer (sendto on it takes no
//     address). This is what harnesses hand over, at no cost.
//   - /dev/null, /dev/zero and the other devices of the sandbox's /dev
//     pass, and the init reopens them inside the sandbox.
//   - A terminal gets a pseudo-terminal of the sandbox.
//   - Everything else is relayed: regular files, FIFOs on a filesystem,
//     other devices, and sockets that are unconnected, datagram or not
//     AF_UNIX (an unconnected datagram socket would let the command send
//     to any address, past the unix socket mediation).
func classifyStdio(f stdioFacts) stdioKind {
	switch f.mode {
	case sIFIFO:
		if f.pipefs {
			return stdioPass
		}
	case sIFSOCK:
		if f.connectedUnixStream {
			return stdioPass
		}
	case sIFCHR:
		if f.tty {
			return stdioTTY
		}
		if _, ok := spec.SandboxDevices[spec.DevNumber(f.rdev)]; ok {
			return stdioPass
		}
	}
	return stdioCopy
}
