package linux

import (
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/stdio"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Session is the caller's side of a session's zygote (zygote_linux.go):
// the sandbox is built once, and each command is one request on the
// control socket, which only this process and the zygote hold. The
// zygote answers each start request on a reply socket of that command's
// own, read by the goroutine that waits for the answer.
type Session struct {
	ctl  int // our end of the control socketpair
	zyg  *exec.Cmd
	stop chan struct{} // closed by Close: ends the thread that forked the zygote
	dead chan struct{} // closed when the control socket ends

	// resolver is the session's name server sockets, owners the table
	// that tells whose look-up a query is (with Spec.Net.Resolver).
	resolver *Resolver
	owners   *PortOwners
	// proxy is the session's refusing proxy listeners (with
	// Spec.Net.ProxyOff), made once for all its commands.
	proxy []net.Listener
	// ports is what Spec.Net.HostPorts and Spec.Net.Publish handed over, once
	// for the session.
	ports *Ports

	sendMu sync.Mutex
	mu     sync.Mutex
	nextID uint64
	// bound are the directories a start request carried, each with the
	// directory it had its name in, that the session then bound
	// read-only (see Start).
	bound  map[boundDir]bool
	err    error // why the session ended
	closed bool
	exited chan struct{}
}

// StartSession starts a session's zygote for in (Path, Argv and Env are
// unused; each command brings its own).
func StartSession(in *spec.Spec) (*Session, error) {
	if bad := in.NonUTF8(); bad != "" {
		return nil, errNonUTF8(bad)
	}
	if in.Degraded.On {
		return nil, errors.New("sessions need user namespaces")
	}
	if len(in.Degraded.ProxyAddrs) > 0 {
		return nil, errors.New("a session's allow-list proxy needs the session's own network namespace; degraded runs start each command on its own")
	}
	sp := *in
	sp.Session.On = true
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socketpair", err)
	}
	s := &Session{ctl: fds[0], stop: make(chan struct{}), dead: make(chan struct{}), exited: make(chan struct{})}
	child := os.NewFile(uintptr(fds[1]), "session-control")
	if sp.Net.Resolver {
		if s.owners, err = newPortOwners(); err != nil {
			unix.Close(s.ctl)
			child.Close()
			return nil, err
		}
	}
	// The zygote's parent-death signal fires when the thread that forked
	// it exits, not the process: fork it from a thread of its own that
	// lives until Close, so a caller's locked goroutine ending elsewhere
	// cannot take the session down.
	type started struct{ err error }
	ready := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := s.launch(&sp, child)
		child.Close()
		ready <- started{err}
		if err != nil {
			return
		}
		<-s.stop
	}()
	if r := <-ready; r.err != nil {
		unix.Close(s.ctl)
		s.owners.Close()
		return nil, r.err
	}
	go s.read()
	go func() {
		s.zyg.Wait()
		close(s.exited)
	}()
	return s, nil
}

// launch starts the zygote in fresh namespaces, exactly as Start starts a
// lone run's init stage, and waits until it is ready or has failed.
func (s *Session) launch(sp *spec.Spec, control *os.File) error {
	// Exactly as a lone run's init: the zygote keeps its capabilities
	// for good (it forks every command), but each command's thread drops
	// all but CAP_SYS_ADMIN before forking, and exec drops that.
	o := stageStart{
		args: []string{spec.StageArg0}, env: []string{spec.StageEnv + "=" + spec.StageValue},
		// fd 5: the control socket (spec.ControlFD).
		files: []*os.File{control},
		where: "the session's sandbox", ended: "session sandbox ended before it was ready",
	}
	if sp.Net.Resolver || sp.Net.Proxy && sp.Net.ProxyOff {
		// The name server's sockets and the refusing proxy's
		// listeners, made once by the zygote, come over a socketpair
		// as a lone run's do; the port owners table goes with the
		// zygote.
		o.proxy, o.resolver = sp.Net.Proxy && sp.Net.ProxyOff, sp.Net.Resolver
		if s.owners != nil {
			o.owners = s.owners.File
		}
	}
	st, _, err := spawnStage(sp, o)
	if err != nil {
		return err
	}
	// The zygote reports nothing more on its status pipe.
	st.statusFile.Close()
	s.zyg, s.proxy, s.resolver, s.ports = st.cmd, st.proxy, st.resolver, st.ports
	return nil
}

// ProxyListeners are the session's refusing proxy listeners, HTTP then
// SOCKS5 (nil without Spec.Net.ProxyOff): the caller serves them for the
// session's life, and closes them before Close.
func (s *Session) ProxyListeners() []net.Listener { return s.proxy }

// Ports is what the session's sandbox handed over for Spec.Net.HostPorts and
// Spec.Net.Publish (nil without them): the caller serves it for the
// session's life, and closes it before Close.
func (s *Session) Ports() *Ports { return s.ports }

// Resolver is the session's name server sockets (nil without
// Spec.Net.Resolver): the caller serves them for the session's life, and
// closes them before Close.
func (s *Session) Resolver() *Resolver { return s.resolver }

// PortOwner is the id of the command whose socket at the session's local
// port, over network ("udp" or "tcp"), last connected to the name server
// (its low 32 bits, as [SessionProcess.ID] gives it); 0 when none did.
func (s *Session) PortOwner(network string, port uint16) uint32 {
	return s.owners.Owner(network, port)
}

// read waits for the control socket to end: the zygote sends nothing on
// it, so its end means the zygote is gone.
func (s *Session) read() {
	var buf [1]byte
	var err error
	for {
		var n int
		n, _, _, _, err = unix.Recvmsg(s.ctl, buf[:], nil, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) || (err == nil && n > 0) {
			continue
		}
		break
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = errors.New("the session's sandbox ended")
		if err != nil {
			s.err = fmt.Errorf("the session's sandbox ended: %w", err)
		}
	}
	s.mu.Unlock()
	close(s.dead)
}

// ended is why the session can run nothing more.
func (s *Session) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return errors.New("the session's sandbox ended")
	}
	return s.err
}

// Close ends the session: the zygote exits, and with it, as PID 1 of the
// session's pid namespace, every command still running. It waits until
// the zygote is gone.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.err == nil {
		s.err = errors.New("session closed")
	}
	s.mu.Unlock()
	// Shutting our end down is the zygote's signal to exit; killing it
	// is the fallback should it be stuck.
	unix.Shutdown(s.ctl, unix.SHUT_RDWR)
	select {
	case <-s.exited:
	case <-time.After(2 * time.Second):
		s.zyg.Process.Kill()
		<-s.exited
	}
	<-s.dead
	unix.Close(s.ctl)
	close(s.stop)
	// The caller stopped serving the name server before Close: nobody
	// reads the table any more.
	s.owners.Close()
	return nil
}

// Pid is the process id of the session's zygote, for diagnostics.
func (s *Session) Pid() int { return s.zyg.Process.Pid }

// Done is closed when the session's sandbox has ended (Close, or the
// zygote died).
func (s *Session) Done() <-chan struct{} { return s.dead }

func (s *Session) send(r spec.Request, fds []int) error {
	b := r.Append(nil)
	var memfd = -1
	var err error
	if len(b) > spec.MaxPacket {
		if len(b) > spec.MaxBigRequest {
			return fmt.Errorf("command line and environment take %d bytes, more than a session accepts (%d)", len(b), spec.MaxBigRequest)
		}
		memfd, err = unix.MemfdCreate("agentbox-request", unix.MFD_CLOEXEC)
		if err != nil {
			return os.NewSyscallError("memfd_create", err)
		}
		defer unix.Close(memfd)
		for off := 0; off < len(b); {
			n, err := unix.Write(memfd, b[off:])
			if err != nil {
				return err
			}
			off += n
		}
		fds = append(fds, memfd)
		big := spec.Request{Op: "big", ID: r.ID, Held: r.Held}
		b = big.Append(nil)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := scm.Send(s.ctl, b, fds); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}

// SessionProcess is one command of a session.
type SessionProcess struct {
	s  *Session
	id uint64
	// reply is our end of the command's reply socket, non-blocking in
	// the runtime's poller: a goroutine waiting for an answer parks
	// rather than holding a thread in a blocking call, which keeps the
	// runtime's monitor thread polling every 20 us meanwhile.
	reply *os.File
	stdio *relay
	proxy []net.Listener
	// unreachable is what the command's connects could not reach, from
	// the zygote's last answer.
	unreachable []spec.Unreachable
	// files and filesUnavailable are the file observer's, from the
	// zygote's last answer.
	files            []fsreport.Denied
	filesUnavailable string
}

// answerSize is room for an answer: one packet, whose exit answer's
// file refusals the zygote fits in its budget (maxFilesAnswer).
const answerSize = spec.MaxPacket

// answerBufs hold the answers' read buffers, reused: a fresh one for each
// of a command's two answers was 128 KiB to clear and collect per command,
// and the garbage collector's cycles it brought were a measurable part of
// a session command's time. Decode copies what it keeps, so a buffer is
// free again once its answer is decoded.
var answerBufs = sync.Pool{New: func() any { return new([answerSize]byte) }}

// answer reads the zygote's next answer for this command; the zygote
// gone (its end of the reply socket closed) is an error.
func (p *SessionProcess) answer() (spec.Answer, error) {
	buf := answerBufs.Get().(*[answerSize]byte)
	defer answerBufs.Put(buf)
	// Room for a command's two proxy listeners.
	oob := make([]byte, unix.CmsgSpace(2*4))
	rc, err := p.reply.SyscallConn()
	if err != nil {
		return spec.Answer{}, fmt.Errorf("session: %w", err)
	}
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf[:], oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	var fds []int
	if oobn > 0 {
		fds = scm.Rights(oob[:oobn])
	}
	var r spec.Answer
	if err == nil && rerr == nil && n > 0 && r.Decode(buf[:n]) == nil {
		if r.Started {
			r.FDs = fds
		} else {
			scm.CloseAll(fds)
		}
		return r, nil
	}
	scm.CloseAll(fds)
	return spec.Answer{}, fmt.Errorf("session: %w", p.s.ended())
}

// Start runs one command in the session. Its stdio reaches the command
// as a lone run's does (classifyStdio): an anonymous pipe or a connected
// unix stream socket is passed as it is, a device of the sandbox's /dev
// is reopened there by the zygote (the caller's /dev/null is the host's
// node), and everything else, the caller's files and terminals included,
// is relayed through a pipe, so that the command never holds a host inode
// it could chmod or touch through /proc/self/fd. A session gives no
// pseudo-terminal: a terminal is relayed as a pipe.
//
// held are the protected paths the caller holds for this command (see
// [Placeholders.Held]): the session binds each read-only, where it is not
// already, before the command starts. The caller releases them once Wait
// has returned.
//
// onID, when set, is called with the command's id (as [SessionProcess.ID]
// gives it) before the command can start: whatever agentbox attributes
// to the command by that id ([Session.PortOwner]) can be in place before
// the command acts.
//
// hides are the masks the command needs (HidePlan of the policy's
// hidden paths as they are now): the session makes those that are not
// made, or fails the command.
func (s *Session) Start(path string, argv, env []string, dir string, stdio Stdio, held []HeldPath, hides []spec.Hide, onID func(uint32)) (*SessionProcess, error) {
	for _, p := range []string{path, dir} {
		if !utf8.ValidString(p) {
			return nil, errNonUTF8(p)
		}
	}
	if len(held) > spec.MaxHeld {
		return nil, fmt.Errorf("the command's %d protected paths to hold are more than a session takes (%d); use fewer writable roots, or lone runs", len(held), spec.MaxHeld)
	}
	// A directory this session has bound before in the same directory
	// is bound still, if it is the one the caller holds at the path (the
	// caller checked the name leads to it, or put it there by a rename
	// that replaced nothing): its bind goes only with its
	// name (an rmdir, and a directory's inode never gets another name
	// after that), follows it through renames within the mount it was
	// made under (Pool; the directory holding it stands for that mount:
	// nothing is bound over a placeholder's directory while the session
	// lives), and nothing in the sandbox can unmount. A file can get its
	// inode back under the name by a hard link after an unlink took its
	// bind: files are always sent.
	var heldPaths []string
	var heldFds []int
	var sent []boundDir
	for _, h := range held {
		if !utf8.ValidString(h.Path) {
			return nil, errNonUTF8(h.Path)
		}
		id := boundDir{h.ID, h.Parent}
		if h.Dir && h.IDOK && h.Parent != [2]uint64{} {
			s.mu.Lock()
			known := s.bound[id]
			s.mu.Unlock()
			if known {
				continue
			}
			sent = append(sent, id)
		}
		heldPaths, heldFds = append(heldPaths, h.Path), append(heldFds, int(h.File.Fd()))
	}
	s.mu.Lock()
	dead := false
	select {
	case <-s.dead:
		dead = true
	default:
	}
	if s.closed || dead {
		s.mu.Unlock()
		return nil, fmt.Errorf("session: %w", s.err)
	}
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	if onID != nil {
		onID(uint32(id))
	}
	rl, err := newRelay(stdio)
	if err != nil {
		return nil, err
	}
	reply, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		rl.abort()
		return nil, os.NewSyscallError("socketpair", err)
	}
	if err := unix.SetNonblock(reply[0], true); err != nil {
		unix.Close(reply[0])
		unix.Close(reply[1])
		rl.abort()
		return nil, os.NewSyscallError("fcntl", err)
	}
	p := &SessionProcess{s: s, id: id, reply: os.NewFile(uintptr(reply[0]), "session-reply"), stdio: rl}
	req := spec.StartRequest(id, path, argv, env, dir)
	req.Held = heldPaths
	req.Hides = hides
	err = s.send(req, append(append(rl.child[:], reply[1]), heldFds...))
	for _, h := range held {
		runtime.KeepAlive(h.File)
	}
	unix.Close(reply[1])
	rl.closeChild()
	if err != nil {
		p.reply.Close()
		rl.abort()
		return nil, err
	}
	r, err := p.answer()
	if err == nil && !r.Started {
		err = startError(r.Code, r.Error)
	}
	if err != nil {
		p.reply.Close()
		rl.abort()
		return nil, err
	}
	if len(sent) > 0 {
		s.mu.Lock()
		if s.bound == nil || len(s.bound) > maxBound {
			// Placeholders made anew for each command (no pool) would
			// grow it for good: forgetting costs only a check.
			s.bound = map[boundDir]bool{}
		}
		for _, id := range sent {
			s.bound[id] = true
		}
		s.mu.Unlock()
	}
	if len(r.FDs) > 0 {
		if p.proxy, err = listenersOf(r.FDs); err != nil {
			p.Kill()
			rl.abort()
			p.Wait()
			return nil, fmt.Errorf("receiving the command's proxy listeners from the session's sandbox: %w", err)
		}
	}
	rl.run()
	return p, nil
}

// Unreachable is what the command's connects could not reach (with
// Spec.Net.Resolver); set by Wait.
func (p *SessionProcess) Unreachable() []spec.Unreachable { return p.unreachable }

// ID is the command's id in its session, as [Session.PortOwner] gives it.
func (p *SessionProcess) ID() uint32 { return uint32(p.id) }

// maxBound bounds Session.bound.
const maxBound = 4096

// boundDir is a directory bound in a session, and the directory it was
// bound in.
type boundDir struct {
	id     identity
	parent [2]uint64
}

// ProxyListeners are the command's own HTTP and SOCKS5 proxy listeners on
// the session's loopback (nil without an allow-list). The caller serves
// them and closes them when the command has ended.
func (p *SessionProcess) ProxyListeners() []net.Listener { return p.proxy }

// Wait waits for the command; when it returns, every process the command
// started is gone too (its pid namespace died with it).
func (p *SessionProcess) Wait() (code, signal int, err error) {
	r, err := p.answer()
	p.reply.Close()
	cerr := p.stdio.wait()
	switch {
	case err != nil:
		return 0, 0, err
	case r.Error != "":
		return 0, 0, errors.New(r.Error)
	case cerr != nil && r.Status == 0 && r.Signal == 0:
		// As os/exec: a lost output is the error of a command that
		// otherwise succeeded.
		return 0, 0, fmt.Errorf("copying the command's output: %w", cerr)
	}
	p.unreachable = r.Unreachable
	p.files, p.filesUnavailable = r.Files, r.FilesUnavailable
	return r.Status, r.Signal, nil
}

// Signal delivers sig to the command (see the zygote's deliver for how a
// command that is PID 1 of its namespace receives it).
func (p *SessionProcess) Signal(sig os.Signal) error {
	ss, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("unsupported signal %v", sig)
	}
	return p.s.send(spec.Request{Op: "signal", ID: p.id, Sig: int(ss)}, nil)
}

// Kill ends the command and everything it started.
func (p *SessionProcess) Kill() error {
	return p.s.send(spec.Request{Op: "kill", ID: p.id}, nil)
}

// relay is a command's stdio relay (internal/stdio), with the
// descriptors the zygote gets and the WaitDelay that bounds its drain.
// The command's tree is gone when Wait drains, but it may have passed a
// pipe on (there is no one to pass it to outside the session, so the
// bound is a safety net).
type relay struct {
	*stdio.Relay
	child     [3]int
	waitDelay time.Duration
}

func newRelay(st Stdio) (*relay, error) {
	r, err := stdio.New(stdio.Config{Stdin: st.Stdin, Stdout: st.Stdout, Stderr: st.Stderr, Pass: passable})
	if err != nil {
		return nil, err
	}
	rl := &relay{Relay: r, waitDelay: st.WaitDelay}
	for i, f := range r.Files() {
		rl.child[i] = int(f.Fd())
	}
	return rl, nil
}

// PassesStdio reports whether a lone run hands f to the command as it is
// (or reopens it from the sandbox's /dev): an anonymous pipe, a connected
// unix stream socket, or one of the sandbox's devices. Anything else a
// lone run relays or gives a pseudo-terminal (see classifyStdio).
func PassesStdio(f *os.File) bool { return passable(f) }

// passable reports whether f may be handed to the command as it is.
func passable(f *os.File) bool {
	facts, err := stdioFactsOf(f)
	return err == nil && classifyStdio(facts) == stdioPass
}

func (rl *relay) closeChild() { rl.CloseChild() }

func (rl *relay) run() { rl.Start() }

func (rl *relay) abort() { rl.Abort() }

func (rl *relay) wait() error { return rl.Wait(rl.waitDelay) }

// Files is what the file observer saw the sandbox refuse the command, and
// when it did not run, why (empty when it ran, or when the command's end
// was not reported). Call it after Wait.
func (p *SessionProcess) Files() ([]fsreport.Denied, string) {
	return p.files, p.filesUnavailable
}
