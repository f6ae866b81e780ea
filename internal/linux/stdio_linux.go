package linux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/stdio"
)

// ---------------------------------------------------------------------------
// Host side: agentbox decides per stream (classifyStdio) and relays.

// stdioRelay is what Start hands exec.Cmd for the init stage's standard
// streams: the relay of internal/stdio, and the pseudo-terminal and
// reopened files around it.
type stdioRelay struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	rel *stdio.Relay
	pty *hostPty
	// reopen are the relayed regular files the init may open itself.
	reopen     []spec.ReopenSpec
	ptyRunning bool
}

// hostPty is the caller's side of a sandbox pseudo-terminal.
type hostPty struct {
	sock     *os.File // ours; the init sends the master on it
	child    *os.File // the init's end
	spec     spec.PtySpec
	term     *os.File // the caller's terminal, for its size
	in       *os.File // the caller's terminal to read keystrokes from, or nil
	out      *os.File // the caller's terminal to show output on, or nil
	rawInput bool
}

func newStdioRelay(s Stdio) (r *stdioRelay, err error) {
	r = &stdioRelay{}
	defer func() {
		if err != nil {
			r.abort()
		}
	}()
	in := s.Stdin
	passed := map[*os.File]bool{}
	var ttyDev uint64
	streams := []any{s.Stdin, s.Stdout, s.Stderr}
	for i, v := range streams {
		f, ok := v.(*os.File)
		if !ok || f == nil {
			continue // relayed through a pipe
		}
		facts, err := stdioFactsOf(f)
		if err != nil {
			return nil, fmt.Errorf("standard stream %d: %w", i, err)
		}
		kind := classifyStdio(facts)
		if kind == stdioTTY && r.pty != nil && facts.rdev != ttyDev {
			kind = stdioCopy // a second, different terminal: rare; a pipe will do
		}
		switch kind {
		case stdioPass:
			passed[f] = true
		case stdioCopy:
			if rs, ok := reopenCandidate(i, f, facts); ok {
				r.reopen = append(r.reopen, rs)
			}
		case stdioTTY:
			if r.pty == nil {
				ttyDev = facts.rdev
				if err := r.newPty(f); err != nil {
					return nil, err
				}
			}
			r.pty.spec.Streams = append(r.pty.spec.Streams, i)
			if i == 0 {
				// The init itself reads nothing; the command gets the slave.
				in = nil
				if foreground(f) {
					r.pty.in, r.pty.rawInput = f, true
				}
			} else if r.pty.out == nil {
				// The init's own diagnostics still reach the terminal,
				// through the relay's pipe.
				r.pty.out = f
			}
		}
	}
	// A bigger pipe means fewer wake-ups for a fast writer.
	if r.rel, err = stdio.New(stdio.Config{
		Stdin: in, Stdout: s.Stdout, Stderr: s.Stderr,
		Pass: func(f *os.File) bool { return passed[f] }, PipeSize: 1 << 20,
	}); err != nil {
		return nil, err
	}
	f := r.rel.Files()
	r.stdin, r.stdout, r.stderr = f[0], f[1], f[2]
	if p := r.pty; p != nil {
		if p.out == nil && p.in != nil && writable(p.in) {
			p.out = p.in // echo goes back to the terminal typed on
		}
		if !p.rawInput {
			// The caller's terminal stays cooked and does the output
			// processing; the pty must not do it a second time.
			p.spec.Oflag &^= unix.OPOST
		}
	}
	return r, nil
}

func (r *stdioRelay) newPty(f *os.File) error {
	fd, err := stdio.RawFd(f)
	if err != nil {
		return err
	}
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("reading the terminal's settings: %w", err)
	}
	p := &hostPty{term: f, spec: spec.PtySpec{
		Iflag: t.Iflag, Oflag: t.Oflag, Cflag: t.Cflag, Lflag: t.Lflag,
		Cc: t.Cc[:], Ispeed: t.Ispeed, Ospeed: t.Ospeed,
	}}
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		p.spec.Rows, p.spec.Cols, p.spec.Xpixel, p.spec.Ypixel = ws.Row, ws.Col, ws.Xpixel, ws.Ypixel
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socketpair", err)
	}
	p.sock = os.NewFile(uintptr(pair[0]), "pty-socket")
	p.child = os.NewFile(uintptr(pair[1]), "pty-socket-init")
	r.pty = p
	return nil
}

// ptyFile is the init's end of the pty socket, for ExtraFiles; nil
// without a terminal.
func (r *stdioRelay) ptyFile() *os.File {
	if r.pty == nil {
		return nil
	}
	return r.pty.child
}

// ptySpec is the spec's Pty for a socket at descriptor fd of the init.
func (r *stdioRelay) ptySpec(fd int) *spec.PtySpec {
	s := r.pty.spec
	s.FD = fd
	return &s
}

// started runs once the init stage exists: our copies of its ends go,
// and the output copies start (the init's own errors come through them).
func (r *stdioRelay) started() {
	if r.pty != nil {
		r.pty.child.Close()
	}
	r.rel.CloseChild()
	r.rel.StartOutput()
}

// commandStarted runs once the command runs: only now is input taken from
// the caller, so that a sandbox that fails to start (and is retried in
// degraded mode) has consumed none of it. stdinReopened says the init
// opened the caller's stdin file itself: nothing is relayed then.
func (r *stdioRelay) commandStarted(stdinReopened bool) {
	if stdinReopened {
		r.rel.DropInput()
	} else {
		r.rel.StartInput()
	}
	if r.pty != nil {
		r.ptyRunning = true
		r.rel.Go(func() { r.pty.run(r.rel) })
	}
}

// finish waits for the output copies to drain (the sandbox is gone, so
// every writer has closed), at most delay if it is positive, then stops
// the input copies. It returns the first output copy's error.
func (r *stdioRelay) finish(delay time.Duration) error {
	err := r.rel.Wait(delay)
	if r.pty != nil && !r.ptyRunning {
		r.pty.sock.Close() // the init failed before the command ran
	}
	return err
}

// abort undoes newStdioRelay when the init never started.
func (r *stdioRelay) abort() {
	if r.rel != nil {
		r.rel.Abort()
	}
	if r.pty != nil {
		r.pty.sock.Close()
		r.pty.child.Close()
	}
}

// run receives the master from the init and relays until the command's
// side of the terminal is closed by everyone.
func (p *hostPty) run(rel *stdio.Relay) {
	master, err := recvFD(p.sock)
	p.sock.Close()
	if err != nil {
		return
	}
	defer master.Close()
	if p.in != nil {
		if fd, err := stdio.RawFd(p.in); err == nil {
			// Raw mode on the caller's terminal: keystrokes (^C, ^Z,
			// arrows) reach the sandbox's terminal as bytes, and its
			// line discipline turns them into signals for the command's
			// foreground group and echoes them.
			if saved, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
				raw := *saved
				makeRaw(&raw)
				unix.IoctlSetTermios(fd, unix.TCSETSW, &raw)
				defer unix.IoctlSetTermios(fd, unix.TCSETSW, saved)
			}
		}
		rel.CopyIn(master, p.in)
	}
	{
		// A resized window reaches agentbox as SIGWINCH (it is in the
		// terminal's foreground group); the kernel passes the new size
		// on to the command's group as SIGWINCH of its own.
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-winch:
					copyWinsize(p.term, master)
				case <-done:
					return
				}
			}
		}()
		copyWinsize(p.term, master) // it may have changed since Start
	}
	// Everything the command wrote: read until the last slave is closed
	// (EIO), which happens when the sandbox is gone.
	var out io.Writer = io.Discard
	if p.out != nil {
		out = p.out
	}
	stdio.CopyOut(out, master)
}

func copyWinsize(from, to *os.File) {
	ffd, err := stdio.RawFd(from)
	if err != nil {
		return
	}
	if ws, err := unix.IoctlGetWinsize(ffd, unix.TIOCGWINSZ); err == nil {
		unix.IoctlSetWinsize(int(to.Fd()), unix.TIOCSWINSZ, ws)
	}
}

// foreground reports whether agentbox may take input from the terminal f:
// it is in the terminal's foreground process group, or f is not its
// controlling terminal. In the background (`agentbox run -- make &` in an
// interactive shell), switching the terminal to raw mode or reading it
// would stop agentbox with SIGTTOU or SIGTTIN, and the input is the
// shell's: the command then gets the sandbox's terminal without input.
func foreground(f *os.File) bool {
	fd, err := stdio.RawFd(f)
	if err != nil {
		return false
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return true // not our controlling terminal: no job control applies
	}
	return pgrp == unix.Getpgrp()
}

// makeRaw is cfmakeraw(3).
func makeRaw(t *unix.Termios) {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
}

// reopenCandidate returns what the init needs to reopen stream i, a
// regular file, inside the sandbox (see ReopenSpec).
func reopenCandidate(i int, f *os.File, facts stdioFacts) (spec.ReopenSpec, bool) {
	rs := spec.ReopenSpec{Stream: i}
	if facts.mode != unix.S_IFREG {
		return rs, false
	}
	fd, err := stdio.RawFd(f)
	if err != nil {
		return rs, false
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return rs, false
	}
	acc := fl & unix.O_ACCMODE
	switch {
	case i == 0 && acc != unix.O_WRONLY:
		off, err := unix.Seek(fd, 0, io.SeekCurrent)
		if err != nil {
			return rs, false
		}
		rs.Offset = off
	case i > 0 && acc != unix.O_RDONLY && fl&unix.O_APPEND != 0:
	default:
		return rs, false
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return rs, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return rs, false
	}
	rs.Path, rs.Dev, rs.Ino = p, st.Dev, st.Ino
	return rs, true
}

func writable(f *os.File) bool {
	fd, err := stdio.RawFd(f)
	if err != nil {
		return false
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE != unix.O_RDONLY
}

// stdioFactsOf gathers what classifyStdio needs about f.
func stdioFactsOf(f *os.File) (stdioFacts, error) {
	var facts stdioFacts
	fd, err := stdio.RawFd(f)
	if err != nil {
		return facts, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return facts, os.NewSyscallError("fstat", err)
	}
	facts.mode = st.Mode & unix.S_IFMT
	facts.rdev = st.Rdev
	switch facts.mode {
	case unix.S_IFIFO:
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err == nil && sfs.Type == unix.PIPEFS_MAGIC {
			facts.pipefs = true
		}
	case unix.S_IFSOCK:
		domain, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		_, err3 := unix.Getpeername(fd)
		facts.connectedUnixStream = err1 == nil && err2 == nil && err3 == nil &&
			domain == unix.AF_UNIX && (typ == unix.SOCK_STREAM || typ == unix.SOCK_SEQPACKET)
	case unix.S_IFCHR:
		_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		facts.tty = err == nil
	}
	return facts, nil
}

// recvFD receives one descriptor sent with SCM_RIGHTS on sock.
func recvFD(sock *os.File) (*os.File, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("recvmsg", err)
	}
	if n == 0 && oobn == 0 {
		return nil, io.EOF
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds[1:] {
			unix.Close(fd)
		}
		if len(fds) > 0 {
			return os.NewFile(uintptr(fds[0]), "pty-master"), nil
		}
	}
	return nil, errors.New("no descriptor received")
}
