package client

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/internal/resident/proto"
)

// Only cmd/agentbox imports this package: in any other program (the
// library's users, tests) a first argument "run" means something else.
func init() {
	if len(os.Args) < 2 || os.Args[1] != "run" {
		return
	}
	if code, served := run(); served {
		os.Exit(code)
	}
}

// replyBuf receives the helper's replies. Not on the stack, where 64 KiB
// would grow the goroutine's stack by copying (page faults worth a tenth
// of a millisecond): untouched pages of it are never faulted in.
var replyBuf [proto.MaxReply]byte

// forwarded are the signals the CLI relays to its command: the full
// CLI's (contract.Forwarded), which this package cannot import.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// run hands this process's run to the helper; served is false when the
// helper did not run it (nothing ran), and the full CLI takes over.
func run() (code int, served bool) {
	switch os.Getenv("AGENTBOX_RESIDENT") {
	case "0", "false", "off", "no", "FALSE", "False", "OFF", "Off", "NO", "No":
		// The full CLI's check (case-insensitive) decides the rest.
		return 0, false
	}
	// A terminal is never passed to a helper's command (a lone run gives
	// the command a pseudo-terminal of its own): no round trip for it.
	for fd := range 3 {
		if isTerminal(fd) {
			return 0, false
		}
	}
	state := stateDir()
	if state == "" {
		return 0, false
	}
	dir := state + "/resident"
	sock := dir + "/sock"
	if len(sock) >= 108 || ident.CheckDir(dir) != nil {
		return 0, false
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer syscall.Close(fd)
	if syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}) != nil {
		return 0, false
	}
	// The listener must be the helper, not a socket a sandboxed process
	// put there.
	if _, err := ident.Check(fd, false); err != nil {
		return 0, false
	}
	req := &proto.Run{Args: os.Args, Env: os.Environ(), StateDir: state}
	if req.Binary, err = ident.Binary(); err != nil {
		return 0, false
	}
	if req.Umask, err = ident.Umask(); err != nil {
		return 0, false
	}
	if req.Rlimits, err = ident.Rlimits(); err != nil {
		return 0, false
	}
	if req.Dir, err = os.Getwd(); err != nil {
		return 0, false
	}
	if req.Executable, err = os.Executable(); err != nil || req.Executable == "" {
		return 0, false
	}
	b := (&proto.Message{Kind: proto.KindRun, Run: req}).Marshal()
	if len(b) > proto.MaxMessage {
		return 0, false
	}
	if sendmsg(fd, b, syscall.UnixRights(0, 1, 2)) != nil {
		return 0, false
	}
	// Set up while the helper resolves and starts the command: each
	// signal Notify enables waits for the runtime's signal thread.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	buf := replyBuf[:]
	r := recvReply(fd, buf)
	if r != nil && r.Kind == proto.KindOpenReport && sendReport(fd, r.Text) {
		r = recvReply(fd, buf)
	}
	if r == nil || r.Kind != proto.KindStarted {
		// Nothing runs. A signal caught meanwhile was meant for the
		// run: it gets it as the full CLI would have before it
		// started anything (the default action).
		signal.Stop(sigs)
		select {
		case s := <-sigs:
			signal.Reset(s)
			syscall.Kill(os.Getpid(), s.(syscall.Signal))
		default:
		}
		return 0, false
	}
	go func() {
		for s := range sigs {
			sendmsg(fd, (&proto.Message{Kind: proto.KindSignal, Code: int(s.(syscall.Signal))}).Marshal(), nil)
		}
	}()
	for {
		r = recvReply(fd, buf)
		switch {
		case r == nil:
			// The command ran, and is gone with the helper (the
			// connection was its lifeline): running it again would
			// run it twice. Agentbox's failure, 125.
			os.Stderr.WriteString("agentbox: the resident helper ended while the command ran (connection lost); its sandbox was killed with it\n")
			return 125, true
		case r.Kind == proto.KindText:
			os.Stderr.WriteString(r.Text)
		case r.Kind == proto.KindExited:
			if r.Text != "" {
				os.Stderr.WriteString(r.Text)
			}
			return r.Code, true
		}
	}
}

// stateDir is agentdirs.State for Linux (which this package cannot
// import: it would pull reflect in): $XDG_STATE_HOME/agentbox or
// ~/.local/state/agentbox. The helper serves only its own state
// directory, so a disagreement falls back, never misleads.
func stateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); len(d) > 0 && d[0] == '/' {
		return clean(d) + "/agentbox"
	}
	if h := os.Getenv("HOME"); len(h) > 0 && h[0] == '/' {
		return clean(h) + "/.local/state/agentbox"
	}
	return ""
}

// clean drops trailing slashes; any other oddity makes a path the helper
// will not recognise as its own (and the full CLI runs).
func clean(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if p == "/" {
		return ""
	}
	return p
}

func isTerminal(fd int) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// sendmsg sends one message, without raising SIGPIPE, retrying on EINTR.
func sendmsg(fd int, b, oob []byte) error {
	for {
		err := syscall.Sendmsg(fd, b, oob, nil, syscall.MSG_NOSIGNAL)
		if err != syscall.EINTR {
			return err
		}
	}
}

// recvReply reads one reply; nil for a broken connection, a message
// that did not fit or a malformed one.
func recvReply(fd int, buf []byte) *proto.Message {
	for {
		n, oobn, flags, _, err := syscall.Recvmsg(fd, buf, nil, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 || oobn != 0 || flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
			return nil
		}
		m, err := proto.Unmarshal(buf[:n], 0)
		if err != nil {
			return nil
		}
		return m
	}
}

// sendReport opens the --report file path as the full CLI does
// (contract.OpenReport, which this package cannot import) and sends it
// to the helper; false when it cannot, and the full CLI then says why.
func sendReport(fd int, path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return sendmsg(fd, (&proto.Message{Kind: proto.KindReport}).Marshal(), syscall.UnixRights(int(f.Fd()))) == nil
}
