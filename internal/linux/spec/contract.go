package spec

import "github.com/agentbox/agentbox/internal/fsreport"

// The parent hands the init stage two pipes, named by these fds (runc's
// pattern): the spec to read, and a status channel to report on.
const (
	SpecFD   = 3
	StatusFD = 4
	// stageEnv marks the re-exec'd process; argv[0] alone could be faked
	// by any program named like our stage.
	StageEnv   = "_AGENTBOX_STAGE"
	StageValue = "init"
	StageArg0  = "agentbox-init"
)

// Message is what the init stage (or the reaper above it, or a session's
// zygote) reports on the status pipe, in frames of its encoding
// (AppendFrame, ReadMessage): once Started or an Error, then, for a lone
// run, once Exited.
type Message struct {
	// Error is set when the sandbox could not be built or the command not
	// started; Code is then the exit status agentbox should use.
	Error string
	Code  int
	// Started is sent once the command runs.
	Started bool
	// StdinReopened, with Started: the init opened the caller's stdin
	// file itself, and agentbox must not relay it (stdio_linux.go).
	StdinReopened bool
	// Exited reports how the command ended.
	Exited bool
	Status int
	Signal int
	// Unreachable, with Exited, is what the command's connects could
	// not reach with the network off.
	Unreachable []Unreachable
	// Files, with Exited, is what the file observer saw the sandbox
	// refuse (Spec.Walls.Files); FilesUnavailable says why it saw nothing.
	Files            []fsreport.Denied
	FilesUnavailable string
	// NoUserns marks an Error caused by a user namespace without the
	// capabilities it should have (AppArmor's restriction on Ubuntu).
	NoUserns bool
}

// The reaper stage's marks (reap_linux.go): its argv[0] and stage value,
// and how it learns which descriptors are the init's.
const (
	ReaperArg0  = "agentbox-reaper"
	ReaperValue = "reaper"
	// initFDsEnv tells the reaper how many descriptors from 3 up are the
	// init's, to pass on in place; the next one is the lifeline, the read
	// end of a pipe whose only write end agentbox holds: it reads
	// end-of-file once agentbox closes it or dies.
	InitFDsEnv = "_AGENTBOX_INIT_FDS"
)

// ControlFD is a session's control socket in the zygote (zygote_linux.go).
const ControlFD = 5

// Request is a request on the control socket, in its encoding (Append,
// Decode). A start request carries, as SCM_RIGHTS, the command's stdin,
// stdout and stderr, then the command's reply socket (a SOCK_SEQPACKET
// end on which the zygote answers that request alone, so that the
// caller's goroutine waiting for the answer reads it itself), then a
// descriptor of what is at each of Held (see mounter_linux.go), and, when
// the request would not fit in one packet, last, a memfd holding it.
type Request struct {
	Op   string // "start", "signal", "kill", "big"
	ID   uint64
	Path string
	// Argv and Env travel byte for byte, valid UTF-8 or not.
	Argv []string
	Env  []string
	Dir  string // "" means the session's workspace
	Sig  int
	// Held are the protected paths the host holds for this command
	// (placeholders it made for it, and existing protected directories),
	// to be bound read-only before the command starts where they are not
	// already. Also set in a "big" request's own packet.
	Held []string
	// Hides are the masks the command needs (see Session.Start).
	Hides []Hide
}

// StartRequest is the start request for a command.
func StartRequest(id uint64, path string, argv, env []string, dir string) Request {
	return Request{Op: "start", ID: id, Path: path, Argv: argv, Env: env, Dir: dir}
}

// Answer answers a start request, on its reply socket, in its encoding
// (Append, Decode): one Started (or Error), then one Exited. With an
// allow-list, Started carries the command's two proxy listeners as
// SCM_RIGHTS (HTTP, then SOCKS5; see commandListeners).
type Answer struct {
	ID      uint64
	Started bool
	Exited  bool
	Status  int
	Signal  int
	Error   string
	Code    int
	// Unreachable, with Exited, is what the command's connects could
	// not reach with the network off.
	Unreachable []Unreachable
	// Files and FilesUnavailable, with Exited, are the file
	// observer's (see Message).
	Files            []fsreport.Denied
	FilesUnavailable string

	FDs []int // received with the answer (the client's side only)
}

// MaxPacket bounds a control message; larger start requests travel in a
// memfd. It stays below the default socket buffer (net.core.wmem_default).
const MaxPacket = 64 << 10

// MaxBigRequest bounds a start request passed in a memfd (argv and the
// environment together; the kernel's own limit for execve is near this).
const MaxBigRequest = 8 << 20

// Unreachable is a destination a command's connect could not reach
// because the sandbox has no network (ENETUNREACH: its namespace has only
// loopback), and how often it tried. The connect supervisor sees every
// connect; a datagram sent without one is not seen.
type Unreachable struct {
	Addr  string `json:"addr"`
	Port  uint16 `json:"port"`
	Count int    `json:"count"`
	// Reason is why, when the connect supervisor refused the connect
	// itself (transparent mode); empty for ENETUNREACH.
	Reason string `json:"reason,omitempty"`
}

// The first byte of the handover message: the sockets are all there, or
// (then followed by why, at most MaxHandoverText bytes) the transparent
// listener is not, because transparent networking is unavailable.
const (
	HandoverOK            = 1
	HandoverNoTransparent = 2
	MaxHandoverText       = 400
)

// MaxHeld bounds the paths one command's start request may ask to bind:
// they travel as SCM_RIGHTS, whose kernel limit (SCM_MAX_FD) is 253 fds
// per message, with the command's stdio, reply socket and memfd.
const MaxHeld = 240

// SandboxDevices are the character devices the sandbox's /dev holds, by
// device number: the init reopens a stream that is one of them from its
// own /dev, whose bind mounts are read-only, so nothing reaches the host's
// node. Any other device is relayed.
var SandboxDevices = map[[2]uint32]string{
	{1, 3}: "null", {1, 5}: "zero", {1, 7}: "full", {1, 8}: "random", {1, 9}: "urandom",
}

// DevNumber splits a Linux dev_t (glibc's gnu_dev_major/minor encoding).
func DevNumber(rdev uint64) [2]uint32 {
	major := uint32((rdev>>32)&0xfffff000) | uint32((rdev>>8)&0xfff)
	minor := uint32((rdev>>12)&0xffffff00) | uint32(rdev&0xff)
	return [2]uint32{major, minor}
}
