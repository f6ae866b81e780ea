package resident

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/internal/resident/proto"
	streams "github.com/agentbox/agentbox/internal/stdio"
	"github.com/agentbox/agentbox/internal/wire"
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

	mu       sync.Mutex
	sessions map[string]*entry
	active   int // connections being served
	// busy counts the connections whose last reply is not decided yet:
	// a connection stops counting just before it sends its command's
	// exit (or its fallback), so that a cleanup the client runs next
	// never finds the helper busy with a command that has ended. The
	// helper waits for the rest (see shutdown) before it exits.
	busy     int
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
func Serve(stateDir string) error {
	if err := os.Chdir("/"); err != nil {
		return err
	}
	// Nothing inherited may leak into the sandboxes' zygotes.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	s := &server{stateDir: stateDir, dir: Dir(stateDir), idle: idlePeriod(),
		sessions: map[string]*entry{}, last: time.Now(), quit: make(chan struct{})}
	s.sock = filepath.Join(s.dir, "sock")
	if got := agentdirs.State(os.Getenv, runtime.GOOS); got != stateDir {
		// The sessions would keep their placeholder records elsewhere
		// than the CLIs they serve.
		return fmt.Errorf("state directory %q from the environment, not %q", got, stateDir)
	}
	if err := ident.CheckDir(s.dir); err != nil {
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
		s.busy++
		s.mu.Unlock()
		go func() {
			settle := sync.OnceFunc(func() {
				s.mu.Lock()
				s.busy--
				s.mu.Unlock()
			})
			defer func() {
				settle()
				unix.Close(fd)
				s.mu.Lock()
				s.active--
				s.last = time.Now()
				s.mu.Unlock()
			}()
			s.serve(fd, settle)
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
	// A connection that has settled (see busy) may still be sending its
	// command's exit: it goes out before the helper does. Its client
	// closes the connection on it; one that does not is not waited for
	// long.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		sending := s.active - s.busy
		s.mu.Unlock()
		if sending == 0 {
			break
		}
	}
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

// serve handles one connection: one run, or a stop request.
func (s *server) serve(fd int, settle func()) {
	if _, err := checkPeer(fd, true); err != nil {
		// Nothing is said to a peer we do not trust.
		return
	}
	// A buffer of the request's size (a few KiB), learnt by peeking: a
	// pooled one of MaxMessage would be reallocated, and zeroed, after
	// every GC cycle, which in a helper comes every few requests.
	size, err := peekSize(fd)
	if err != nil || size == 0 || size > proto.MaxMessage {
		return
	}
	buf := make([]byte, size)
	// Room for a Run's descriptors: more is a truncated message, refused.
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, fds, err := recvMsg(fd, buf, oob)
	if err != nil || n == 0 {
		return
	}
	m, err := proto.Unmarshal(buf[:n], len(fds))
	if err != nil {
		// Nothing is said to a malformed request either: no client of
		// this build sends one.
		closeAll(fds)
		return
	}
	switch m.Kind {
	case proto.KindRun:
		s.serveRun(fd, settle, m.Run, fds)
	case proto.KindStopIdle:
		s.stopIdle(fd)
	default:
		closeAll(fds)
	}
}

// job is a client's run as the helper resolved it: what keys its session
// and what it runs.
type job struct {
	// Key fields: together with the policy's bytes, the exact key of
	// the prepared sandbox that may serve the run.
	binary   string // identity of the client's executable
	stateDir string
	roots    []rootID
	umask    int
	rlimits  [][2]uint64
	pol      *policy.Policy
	polBytes []byte
	// The command.
	argv, env []string
	timeout   time.Duration
	report    *contract.ReportFile
}

// serveRun serves a client's run: the policy is resolved here, exactly
// as the client's full CLI would have resolved it, from the client's
// arguments, directory, environment, executable and argv[0].
func (s *server) serveRun(fd int, settle func(), r *proto.Run, fds []int) {
	defer func() {
		// The helper parses the client's flags, config and git files
		// now: a bug there must not end the helper and every other
		// client's command with it. Nothing ran yet if it panicked
		// before start; the full CLI then reports what it finds.
		if p := recover(); p != nil {
			fallback(fd, settle, fmt.Sprintf("internal error: %v", p))
		}
	}()
	stdio := stdioFiles(fds)
	defer closeStdio(&stdio)
	if len(r.Args) < 2 || !strings.HasPrefix(r.Dir, "/") || !strings.HasPrefix(r.Executable, "/") {
		fallback(fd, settle, "malformed request")
		return
	}
	j := &job{binary: r.Binary, stateDir: r.StateDir, umask: r.Umask, rlimits: r.Rlimits, env: r.Env}
	// The cheap refusals before resolving anything.
	if why := s.mismatch(j); why != "" {
		fallback(fd, settle, why)
		return
	}
	run, why := parseRun(r.Args[1:])
	if run == nil {
		fallback(fd, settle, why)
		return
	}
	if run.f.Report != "" {
		// Opened by the client, as its CLI would before resolving.
		if j.report = s.openReport(fd, run.f.Report); j.report == nil {
			return
		}
		defer j.report.Close()
	}
	pol, why := run.resolve(clientCaller(r))
	if pol == nil {
		fallback(fd, settle, why)
		return
	}
	if !Eligible(pol, stdio) {
		fallback(fd, settle, "not a run the helper serves")
		return
	}
	polBytes, err := pol.MarshalBinary()
	if err != nil {
		fallback(fd, settle, err.Error())
		return
	}
	j.pol, j.polBytes, j.roots, j.argv, j.timeout = pol, polBytes, rootIDs(pol), run.argv, run.f.Timeout
	e, why := s.session(j)
	if e == nil {
		fallback(fd, settle, why)
		return
	}
	defer s.release(e)
	s.run(fd, settle, e.s, j, stdio)
}

// clientCaller is the client of r, for policy resolution.
func clientCaller(r *proto.Run) policy.Caller {
	env := make(map[string]string, len(r.Env))
	for _, kv := range r.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			// The first wins, as for os.Getenv (os.Environ has no
			// duplicates anyway).
			if _, dup := env[k]; !dup {
				env[k] = v
			}
		}
	}
	return policy.Caller{Getenv: func(k string) string { return env[k] },
		Dir: r.Dir, Executable: r.Executable, Remote: true, Arg0: r.Args[0]}
}

// openReport asks the client to open the --report file path, and
// returns the file it sent; nil when it sent none (it could not open it:
// its full CLI says why) or something else.
func (s *server) openReport(fd int, path string) *contract.ReportFile {
	if send(fd, &proto.Message{Kind: proto.KindOpenReport, Text: path}, nil) != nil {
		return nil
	}
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4))
	n, fds, err := recvMsg(fd, buf, oob)
	if err != nil || n == 0 {
		return nil
	}
	m, err := proto.Unmarshal(buf[:n], len(fds))
	if err != nil || m.Kind != proto.KindReport {
		closeAll(fds)
		return nil
	}
	return contract.ReportTo(os.NewFile(uintptr(fds[0]), path), path)
}

// fallback tells the client that nothing ran, and why: the connection's
// last reply (the client then runs the command on its own), so the
// connection settles first (see server.busy).
func fallback(fd int, settle func(), why string) error {
	settle()
	return send(fd, &proto.Message{Kind: proto.KindFallback, Text: why}, nil)
}

// stopIdle is `agentbox cleanup`'s request: the helper stops if it runs
// nothing, and otherwise stays for the commands it runs (which may be
// another agent's, or another user's with the same state directory, as
// every root session has) and closes its idle sessions, so that cleanup
// finds their placeholders and tool-cache layers free. A command that is
// ending (its CLI gone, its tree being killed, its exit being sent) is
// given a moment first: a cleanup run right after the last command
// should stop the helper, not find it busy with that command's end.
// stopIdleGrace is how long cleanup's request waits for the commands
// still counted to end.
const stopIdleGrace = time.Second

func (s *server) stopIdle(fd int) {
	for deadline := time.Now().Add(stopIdleGrace); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		if s.busy == 1 || !time.Now().Before(deadline) {
			break // s.mu held
		}
		s.mu.Unlock()
	}
	busy := s.busy - 1 // not this connection
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
		send(fd, &proto.Message{Kind: proto.KindStopped}, nil)
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
	send(fd, &proto.Message{Kind: proto.KindBusy, Busy: busy, Closed: len(idle)}, nil)
}

// mismatch says why the helper cannot start this request's command as
// the CLI would have: another build, state directory, umask or limits.
func (s *server) mismatch(j *job) string {
	switch {
	case j.binary != s.binary:
		return "the helper is another build"
	case j.stateDir != s.stateDir:
		return "another state directory"
	case j.umask != s.umask:
		return "another umask"
	case !reflect.DeepEqual(j.rlimits, s.rlimits):
		return "other resource limits"
	}
	return ""
}

// session finds, or prepares, the session for exactly this job's key.
// The entry is marked active until release.
func (s *server) session(j *job) (*entry, string) {
	// The exact bytes, not a hash of them: equal keys are equal
	// policies.
	key := string(jobKey(j))
	for {
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return nil, "the helper is stopping"
		}
		e := s.sessions[key]
		if e == nil {
			s.mu.Unlock()
			e = s.alias(key, j)
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
			s.prepare(e, j)
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
// the bytes of its key (a session serves every client with that key:
// nothing of the client it was resolved for may stay in it), and only if
// the roots are still what resolution saw.
func (s *server) prepare(e *entry, j *job) {
	defer close(e.ready)
	pol, err := policy.Unmarshal(j.polBytes)
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
	if !reflect.DeepEqual(rootIDs(pol), j.roots) {
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
	e.pol, e.roots = pol, j.roots
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
func (s *server) alias(key string, j *job) *entry {
	reqPol := j.pol
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.sessions {
		// Ready first: e.pol is set (and safe to read) only then.
		if !isReady(e) || e.s == nil || len(e.roots) != len(j.roots) {
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
		for i, id := range j.roots {
			if id != e.roots[i] && !(held[id.Path] && !e.roots[i].Exists && e.roots[i].Path == id.Path) {
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
// connection is the command's lifeline: when the client goes away
// (exits, is killed), the command's whole tree is killed.
func (s *server) run(fd int, settle func(), sess *sandbox.Session, j *job, stdio [3]*os.File) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if j.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, j.timeout)
		defer cancel()
	}
	// Its session runs it under an init of its own (see prepare).
	c := sess.Command(ctx, j.argv[0], j.argv[1:]...)
	c.Env = j.env
	if c.Env == nil {
		c.Env = []string{}
	}
	c.Stdin, c.Stdout, c.Stderr = stdio[0], stdio[1], stdio[2]
	// The run's notes (git-writes checks) for the CLI's stderr.
	var diag streams.Buffer
	c.Diagnostics = &diag
	if err := c.Start(); err != nil {
		// The CLI's own run gives the same answer (126, 127, 125)
		// with the same message.
		fallback(fd, settle, fmt.Sprintf("start: %v", err))
		return
	}
	// The zygote holds its own copies now.
	for i, f := range stdio {
		f.Close()
		stdio[i] = nil
	}
	if err := send(fd, &proto.Message{Kind: proto.KindStarted}, nil); err != nil {
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
			// Anything but a signal is ignored: the command runs on.
			if m, err := proto.Unmarshal(buf[:n], len(fds)); err == nil && m.Kind == proto.KindSignal {
				c.Signal(syscall.Signal(m.Code))
			}
		}
	}()
	err := c.Wait()
	res := contract.PartsOf(err, c.Report)
	res.Diag = diag.String()
	res.Denied = capDenied(res.Denied)
	res.Files = fsreport.Fit(res.Files, maxFiles)
	stderr, code := finish(j.pol, j.timeout, &res, j.report)
	settle()
	for _, m := range proto.Exited(code, stderr) {
		if send(fd, m, nil) != nil {
			break
		}
	}
	// The client closes its end on this reply; the lifeline then ends.
	unix.Shutdown(fd, unix.SHUT_RD)
	<-lifeline
}

// jobKey is the key of j's session: the policy's canonical bytes, then
// everything else that shapes the sandbox.
func jobKey(j *job) []byte {
	b := append(append([]byte(nil), j.polBytes...), 0)
	b = wire.AppendString(b, j.binary)
	b = wire.AppendString(b, j.stateDir)
	b = wire.AppendUint(b, uint64(len(j.roots)))
	for _, r := range j.roots {
		b = wire.AppendString(b, r.Path)
		exists := uint64(0)
		if r.Exists {
			exists = 1
		}
		b = wire.AppendUint(wire.AppendUint(wire.AppendUint(b, exists), r.Dev), r.Ino)
	}
	b = wire.AppendUint(b, uint64(j.umask))
	b = wire.AppendUint(b, uint64(len(j.rlimits)))
	for _, l := range j.rlimits {
		b = wire.AppendUint(wire.AppendUint(b, l[0]), l[1])
	}
	return b
}
