package resident

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/resident/fastpath"
	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/internal/syncbuf"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// server is the helper: one per user and state directory (the lock file
// sees to that), serving connections on its socket until it has been idle
// for its idle period, its binary changed on disk, or `agentbox cleanup`
// asked it to stop.
type server struct {
	dir, sock string
	ln        int
	sockIno   uint64
	stateDir  string
	idle      time.Duration
	// What a request must match: the helper's own build, umask and
	// limits are those of every command it starts.
	binary  string
	exe     string // the executable's path, watched for changes
	exeID   string
	umask   int
	rlimits [][2]uint64
	resolve Resolver

	mu       sync.Mutex
	sessions map[string]*entry
	active   int // connections being served
	last     time.Time
	stopping bool
	quit     chan struct{}
	quitOnce sync.Once
	closing  sync.WaitGroup // sessions being closed; waited for on exit
}

// entry is a prepared sandbox for one exact key.
type entry struct {
	key    string
	ready  chan struct{} // closed once s or refuse is set
	s      *sandbox.Session
	refuse string // why this key is never served (degraded mode, say)
	active int
	last   time.Time
	// What the session was prepared for: the policy and the roots'
	// identity (see alias).
	pol   *policy.Policy
	roots []rootID
}

// Serve runs the helper for the state directory stateDir; it returns when
// the helper exits. Another helper already serving it is not an error.
// resolve serves the lean client's runs (package fastpath); nil serves
// only the CLI's resolved ones.
func Serve(stateDir string, resolve Resolver) error {
	if err := os.Chdir("/"); err != nil {
		return err
	}
	// Nothing inherited may leak into the sandboxes' zygotes.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	s := &server{stateDir: stateDir, dir: Dir(stateDir), idle: idlePeriod(), resolve: resolve,
		sessions: map[string]*entry{}, last: time.Now(), quit: make(chan struct{})}
	s.sock = filepath.Join(s.dir, "sock")
	if got := agentdirs.State(os.Getenv, runtime.GOOS); got != stateDir {
		// The sessions would keep their placeholder records elsewhere
		// than the CLIs they serve.
		return fmt.Errorf("state directory %q from the environment, not %q", got, stateDir)
	}
	if err := checkDir(s.dir); err != nil {
		return err
	}
	var err error
	if s.binary, err = ident.Binary(); err != nil {
		return err
	}
	if s.exe, err = os.Executable(); err != nil {
		return err
	}
	if s.exeID, err = ident.FileID(s.exe); err != nil {
		return err
	}
	if s.umask, err = ident.Umask(); err != nil {
		return err
	}
	if s.rlimits, err = ident.Rlimits(); err != nil {
		return err
	}
	if err := ident.Ready(); err != nil {
		return err
	}
	// The lock is held for the helper's whole life: a second helper
	// (two CLIs racing to start one) finds it taken and leaves.
	lock, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil
	}
	// Not closed: the lock goes with the process, so that whoever waits
	// for it (agentbox cleanup) sees the helper gone, not exiting. (Held
	// in a package variable: a finalizer must not close it either.)
	heldLock = lock
	// Our pid, for `agentbox cleanup` when the socket cannot reach us.
	lock.Truncate(0)
	lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	defer lock.Truncate(0) // still ours: runs before the lock is let go
	// A signal (cleanup's, or the user's) ends the helper as idleness
	// does: sessions closed, placeholders removed.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-sigs
		s.stop()
	}()
	// Whatever socket is there is a dead helper's: we hold the lock.
	os.Remove(s.sock)
	if err := s.listen(); err != nil {
		return err
	}
	defer s.shutdown()
	go s.accept()
	s.watch()
	return nil
}

// heldLock is the helper's lock file, open until the process exits: only
// written, it keeps the file reachable so no finalizer closes it.
//
//lint:ignore U1000 kept for its reachability, never read
var heldLock *os.File

// checkDir refuses a helper directory that is not a real directory of
// ours with mode 0700.
func checkDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o777 != 0o700 {
		return fmt.Errorf("%s: not a directory of uid %d with mode 0700 (mode %o, uid %d); remove it", dir, os.Geteuid(), st.Mode, st.Uid)
	}
	return nil
}

func (s *server) listen() error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: s.sock}); err != nil {
		unix.Close(fd)
		return &os.PathError{Op: "bind", Path: s.sock, Err: err}
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		os.Remove(s.sock)
		return os.NewSyscallError("listen", err)
	}
	var st unix.Stat_t
	if unix.Lstat(s.sock, &st) == nil {
		s.sockIno = st.Ino
	}
	s.ln = fd
	return nil
}

// removeSocket unlinks our socket, and only ours: a new helper may have
// bound its own at the path after we stopped listening.
func (s *server) removeSocket() {
	var st unix.Stat_t
	if unix.Lstat(s.sock, &st) == nil && st.Ino == s.sockIno {
		os.Remove(s.sock)
	}
}

func (s *server) accept() {
	for {
		fd, _, err := unix.Accept4(s.ln, unix.SOCK_CLOEXEC)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED):
			continue
		case errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM):
			// Transient: the CLIs meanwhile run on their own.
			time.Sleep(10 * time.Millisecond)
			continue
		default:
			// The listener is gone: serve no one new, and exit once
			// the commands running now have ended.
			s.mu.Lock()
			s.stopping = true
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			unix.Close(fd)
			continue
		}
		s.active++
		s.mu.Unlock()
		go func() {
			defer func() {
				unix.Close(fd)
				s.mu.Lock()
				s.active--
				s.last = time.Now()
				s.mu.Unlock()
			}()
			s.serve(fd)
		}()
	}
}

// watch ends the helper when it has been idle long enough, when its
// binary changed on disk (the next CLI is another build: it would only
// fall back), or when asked to stop; sessions idle that long are closed
// on the way.
func (s *server) watch() {
	tick := time.NewTicker(min(s.idle/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
		id, err := ident.FileID(s.exe)
		changed := err != nil || id != s.exeID
		s.mu.Lock()
		if changed {
			s.stopping = true
		}
		for _, e := range s.sessions {
			if e.active == 0 && isReady(e) && time.Since(e.last) > s.idle {
				s.drop(e)
				s.closeLater(e)
			}
		}
		done := s.active == 0 && (s.stopping || time.Since(s.last) > s.idle)
		s.mu.Unlock()
		if changed {
			// No new connections: the next CLI starts a helper of
			// its own build.
			s.removeSocket()
		}
		if done {
			return
		}
	}
}

// closeLater closes e's session without holding up the caller; the
// helper does not exit before it is done (the placeholders it holds are
// removed then).
func (s *server) closeLater(e *entry) {
	if e.s == nil {
		return
	}
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		e.s.Close()
	}()
}

func (s *server) stop() {
	s.quitOnce.Do(func() { close(s.quit) })
}

// shutdown releases everything: the socket, then every session (which
// kills what still runs in them and removes their placeholders).
func (s *server) shutdown() {
	s.mu.Lock()
	s.stopping = true
	sessions := s.sessions
	s.sessions = map[string]*entry{}
	s.mu.Unlock()
	s.removeSocket()
	unix.Shutdown(s.ln, unix.SHUT_RDWR)
	unix.Close(s.ln)
	distinct := map[*entry]bool{}
	for _, e := range sessions {
		distinct[e] = true
	}
	for e := range distinct {
		if isReady(e) {
			s.closeLater(e)
		}
	}
	s.closing.Wait()
}

func isReady(e *entry) bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// serve handles one connection: one command, or a stop request.
func (s *server) serve(fd int) {
	if _, err := checkPeer(fd, true); err != nil {
		// Nothing is said to a peer we do not trust.
		return
	}
	// A buffer of the request's size (a few KiB), learnt by peeking: a
	// pooled one of maxMessage would be reallocated, and zeroed, after
	// every GC cycle, which in a helper comes every few requests.
	size, err := peekSize(fd)
	if err != nil || size == 0 || size > maxMessage {
		return
	}
	buf := make([]byte, size)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, fds, err := recvMsg(fd, buf, oob)
	if err != nil || n == 0 {
		return
	}
	if fastpath.IsRequest(buf[:n]) {
		lr, err := fastpath.Decode(buf[:n])
		if err != nil {
			closeAll(fds)
			return
		}
		s.serveLean(fd, lr, fds)
		return
	}
	req, polBytes, err := decodeRequest(buf[:n])
	if err != nil {
		closeAll(fds)
		return
	}
	switch req.Op {
	case "stop":
		closeAll(fds)
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		sendJSON(fd, reply{Exited: true})
		s.stop()
		return
	case "stop-idle":
		closeAll(fds)
		s.stopIdle(fd)
		return
	case "run":
	default:
		closeAll(fds)
		return
	}
	if len(fds) != 3 {
		closeAll(fds)
		sendJSON(fd, reply{Fallback: "malformed request"})
		return
	}
	stdio := stdioFiles(fds)
	defer closeStdio(&stdio)
	s.start(fd, req, polBytes, stdio, jsonReplies{})
}

// stopIdle is `agentbox cleanup`'s request: the helper stops if it runs
// nothing, and otherwise stays for the commands it runs (which may be
// another agent's, or another user's with the same state directory, as
// every root session has) and closes its idle sessions, so that cleanup
// finds their placeholders and tool-cache layers free.
func (s *server) stopIdle(fd int) {
	s.mu.Lock()
	busy := s.active - 1 // not this connection
	var idle []*entry
	if busy == 0 {
		// Decided under the lock new connections are counted under:
		// none is served from here on.
		s.stopping = true
	} else {
		seen := map[*entry]bool{}
		for _, e := range s.sessions {
			if !seen[e] && e.active == 0 && isReady(e) {
				seen[e] = true
				idle = append(idle, e)
			}
		}
		for _, e := range idle {
			s.drop(e)
		}
	}
	s.mu.Unlock()
	if busy == 0 {
		sendJSON(fd, reply{Exited: true})
		s.stop()
		return
	}
	for _, e := range idle {
		if e.s != nil {
			s.closing.Add(1)
			e.s.Close()
			s.closing.Done()
		}
	}
	sendJSON(fd, reply{Busy: busy, Closed: len(idle)})
}

// start runs the request's command in the session for its key, if the
// helper can start it as the CLI would have.
func (s *server) start(fd int, req *runRequest, polBytes []byte, stdio [3]*os.File, out replier) {
	if why := s.mismatch(req); why != "" {
		out.fallback(fd, why)
		return
	}
	e, why := s.session(req, polBytes)
	if e == nil {
		out.fallback(fd, why)
		return
	}
	defer s.release(e)
	s.run(fd, e.s, req, stdio, out)
}

// mismatch says why the helper cannot start this request's command as
// the CLI would have: another build, state directory, umask or limits.
func (s *server) mismatch(r *runRequest) string {
	switch {
	case r.Binary != s.binary:
		return "the helper is another build"
	case r.StateDir != s.stateDir:
		return "another state directory"
	case r.Umask != s.umask:
		return "another umask"
	case !reflect.DeepEqual(r.Rlimits, s.rlimits):
		return "other resource limits"
	case len(r.Argv) == 0:
		return "no command"
	}
	return ""
}

// session finds, or prepares, the session for exactly this request's
// key. The entry is marked active until release.
func (s *server) session(r *runRequest, polBytes []byte) (*entry, string) {
	kb, _ := json.Marshal(struct {
		Binary, StateDir string
		Roots            []rootID
		Umask            int
		Rlimits          [][2]uint64
	}{r.Binary, r.StateDir, r.Roots, r.Umask, r.Rlimits})
	// The exact bytes, not a hash of them: equal keys are equal
	// policies.
	key := string(polBytes) + "\x00" + string(kb)
	for {
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return nil, "the helper is stopping"
		}
		e := s.sessions[key]
		if e == nil {
			s.mu.Unlock()
			e = s.alias(key, r, polBytes)
			s.mu.Lock()
			if e == nil {
				// A request racing this one may have filed a session
				// under this key meanwhile: filing another over it
				// would leave that one unreachable, never closed, its
				// placeholders never removed.
				e = s.sessions[key]
			}
		}
		if e == nil {
			if !s.makeRoom() {
				s.mu.Unlock()
				return nil, "the helper holds as many sandboxes as it may"
			}
			e = &entry{key: key, ready: make(chan struct{}), active: 1}
			s.sessions[key] = e
			s.mu.Unlock()
			s.prepare(e, r, polBytes)
			if e.s == nil {
				s.release(e)
				return nil, e.refuse
			}
			return e, ""
		}
		e.active++
		s.mu.Unlock()
		<-e.ready
		if e.s == nil {
			s.release(e)
			return nil, e.refuse
		}
		select {
		case <-e.s.Done():
			// Its sandbox died (killed from outside): prepare a
			// new one, and close this one, which releases its
			// placeholders.
			s.release(e)
			s.forget(e)
			s.closeLater(e)
			continue
		default:
		}
		return e, ""
	}
}

// makeRoom closes the least recently used idle session when the helper
// holds maxSessions; false when all are busy. s.mu is held.
func (s *server) makeRoom() bool {
	distinct := map[*entry]bool{}
	for _, e := range s.sessions {
		distinct[e] = true
	}
	if len(distinct) < maxSessions {
		return true
	}
	var lru *entry
	for e := range distinct {
		if e.active == 0 && isReady(e) && (lru == nil || e.last.Before(lru.last)) {
			lru = e
		}
	}
	if lru == nil {
		return false
	}
	s.drop(lru)
	s.closeLater(lru)
	return true
}

// prepare builds the session for e: from the policy decoded from exactly
// the bytes the CLI sent, and only if the roots are still what the CLI
// saw.
func (s *server) prepare(e *entry, r *runRequest, polBytes []byte) {
	defer close(e.ready)
	pol, err := policy.Unmarshal(polBytes)
	if err != nil {
		e.refuse = err.Error()
		return
	}
	// Published ports, as in Eligible: a kept session would keep them
	// open on the host between runs.
	if pol.Mode() == policy.DangerFullAccess || pol.AllowList() != nil || len(pol.Publish()) > 0 {
		e.refuse = "not a policy the helper serves"
		return
	}
	if !reflect.DeepEqual(rootIDs(pol), r.Roots) {
		// Not cached: the next request may see the roots settled.
		e.refuse = "the roots changed on disk"
		s.forget(e)
		return
	}
	// Each command under an init of its own (package pid1), started
	// before the command is asked for, so that the command is not its
	// pid namespace's init and its signals, exit codes and 128+N
	// statuses are as in a lone run. The binary is at the same path in
	// the sandbox (the host's tree, read-only).
	sess, err := sandbox.NewSessionWith(pol, sandbox.SessionOptions{CommandInit: s.exe})
	if err != nil {
		// The CLI's own run reports the error; a later request may
		// succeed (a transient failure is not cached).
		e.refuse = fmt.Sprintf("preparing the sandbox: %v", err)
		s.forget(e)
		return
	}
	if !sess.Prepared() {
		sess.Close()
		e.refuse = "no prepared sandbox for this policy here (degraded mode)"
		return
	}
	e.pol, e.roots = pol, r.Roots
	e.s = sess
}

// alias finds the session that already serves this request's policy
// under another key, and files it under this one too. The one case: a
// run of the same workspace was running when the CLI resolved this
// policy, and the placeholders it held for the workspace's missing
// protected names were on disk: this policy sees them as an empty
// directory (or, for a name read as a file, an empty file) where the
// session's has them missing. A session holds and binds every protected
// path of its roots for each command, as a lone run does, whatever was
// on disk when it was prepared (sandbox.Session): a missing name gets a
// placeholder, an existing directory is held and bound read-only as it
// is. So that session confines this run exactly as one prepared for its
// policy would, provided everything else is equal, byte for byte and
// inode for inode. Without this, every run that overlaps another of the
// same workspace would get a sandbox of its own (the placeholders'
// inodes are new each time), and with it a throwaway tool-cache layer.
func (s *server) alias(key string, r *runRequest, polBytes []byte) *entry {
	reqPol, err := policy.Unmarshal(polBytes)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.sessions {
		// Ready first: e.pol is set (and safe to read) only then.
		if !isReady(e) || e.s == nil || len(e.roots) != len(r.Roots) {
			continue
		}
		have := e.pol.Protected()
		norm := reqPol.Protected()
		if len(have) != len(norm) {
			continue
		}
		held := map[string]bool{}
		for i, pr := range norm {
			if have[i].Kind != policy.Missing || have[i].Root == "" || have[i].Path != pr.Path {
				continue
			}
			// What a held placeholder of the same kind is found as.
			if pr.Kind == policy.Dir && !have[i].FileWhenMissing || pr.Kind == policy.File && have[i].FileWhenMissing {
				norm[i].Kind = policy.Missing
				norm[i].FileWhenMissing = have[i].FileWhenMissing
				held[pr.Path] = true
			}
		}
		if len(held) == 0 {
			continue
		}
		a, err1 := reqPol.WithProtected(norm).MarshalBinary()
		b, err2 := e.pol.MarshalBinary()
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			continue
		}
		ok := true
		for j, id := range r.Roots {
			if id != e.roots[j] && !(held[id.Path] && !e.roots[j].Exists && e.roots[j].Path == id.Path) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if s.sessions[key] == nil {
			s.sessions[key] = e
		}
		return e
	}
	return nil
}

func (s *server) forget(e *entry) {
	s.mu.Lock()
	s.drop(e)
	s.mu.Unlock()
}

// drop removes e under every key it is known by (see alias). s.mu is
// held.
func (s *server) drop(e *entry) {
	for k, v := range s.sessions {
		if v == e {
			delete(s.sessions, k)
		}
	}
}

func (s *server) release(e *entry) {
	s.mu.Lock()
	e.active--
	e.last = time.Now()
	s.mu.Unlock()
}

// run starts the command in the session and reports its end. The
// connection is the command's lifeline: when the CLI goes away (exits,
// is killed), the command's whole tree is killed.
func (s *server) run(fd int, sess *sandbox.Session, r *runRequest, stdio [3]*os.File, out replier) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if r.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.Timeout))
		defer cancel()
	}
	// Its session runs it under an init of its own (see prepare).
	c := sess.Command(ctx, r.Argv[0], r.Argv[1:]...)
	c.Env = r.Env
	if c.Env == nil {
		c.Env = []string{}
	}
	c.Stdin, c.Stdout, c.Stderr = stdio[0], stdio[1], stdio[2]
	// The run's notes (git-writes checks) for the CLI's stderr.
	var diag syncbuf.Buffer
	c.Diagnostics = &diag
	if err := c.Start(); err != nil {
		// The CLI's own run gives the same answer (126, 127, 125)
		// with the same message.
		out.fallback(fd, fmt.Sprintf("start: %v", err))
		return
	}
	// The zygote holds its own copies now.
	for i, f := range stdio {
		f.Close()
		stdio[i] = nil
	}
	if err := out.started(fd); err != nil {
		cancel() // the CLI is gone: so is the command
	}
	lifeline := make(chan struct{})
	go func() {
		defer close(lifeline)
		buf := make([]byte, 512)
		for {
			n, fds, err := recvMsg(fd, buf, nil)
			closeAll(fds)
			if err != nil || n == 0 {
				cancel()
				return
			}
			var m control
			if json.Unmarshal(buf[:n], &m) == nil && m.Op == "signal" && m.Sig > 0 && m.Sig < 65 {
				c.Signal(syscall.Signal(m.Sig))
			}
		}
	}()
	err := c.Wait()
	rep := reply{Exited: true, Result: contract.PartsOf(err, c.Report)}
	rep.Diag = diag.String()
	rep.Denied = capDenied(rep.Denied)
	rep.Files = fsreport.Fit(rep.Files, maxFiles)
	out.exited(fd, rep)
	// The CLI closes its end on this reply; the lifeline then ends.
	unix.Shutdown(fd, unix.SHUT_RD)
	<-lifeline
}
