package elevated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/agentbox/agentbox/internal/exitcode"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/ipc"
	"github.com/agentbox/agentbox/internal/windows/setup"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/internal/windows/winenv"
)

// Process is a command running in the elevated sandbox.
type Process struct {
	// Job says which limits the runner's job for the command held, and
	// JobUI whether they include the UI restrictions.
	Job   string
	JobUI bool

	conn *os.File
	pid  uint32
	job  windows.Handle // see JobHandle
	// Frames to the runner go through one writer goroutine (write): ctl
	// (terminate) is never queued behind stdin, and no caller ever blocks
	// on the pipe, so Kill returns at once even when the command does not
	// read its stdin and the pipe is full.
	ctl      chan outFrame
	data     chan outFrame // stdin and close-stdin, in order
	killOnce sync.Once
	mu       sync.Mutex // guards runner
	runner   windows.Handle
	done     chan struct{}
	code     uint32
	err      error
}

type outFrame struct {
	typ     string
	payload any
}

// KillGrace is how long Kill lets the runner end the job before it kills
// the runner itself (whose kill-on-close job then takes the tree along).
var KillGrace = 5 * time.Second

// Pid is the command's process id (not the runner's).
func (p *Process) Pid() uint32 { return p.pid }

// JobHandle is this process's handle to the command's job, when the Spec
// had ProxyPorts (0 otherwise). The caller closes it once nothing asks
// the job anymore; Process never does, so the value cannot be reused for
// another object while the caller still queries it.
func (p *Process) JobHandle() windows.Handle { return p.job }

// dupJob copies the runner's job handle v into this process, through the
// runner's process handle (PROCESS_DUP_HANDLE).
func dupJob(runner windows.Handle, v uint64) (windows.Handle, error) {
	if v == 0 || v > uint64(^uintptr(0)) {
		return 0, fmt.Errorf("agentbox-runner reported no job handle (an agentbox-runner older than this agentbox? run `agentbox setup` again)")
	}
	var h windows.Handle
	if err := windows.DuplicateHandle(runner, windows.Handle(v), windows.CurrentProcess(), &h, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
		return 0, os.NewSyscallError("DuplicateHandle(job)", err)
	}
	return h, nil
}

// launcher starts agentbox-runner with args and returns its process
// handle and id. Production uses CreateProcessWithLogonW; tests start the
// runner as the current user.
type launcher func(args []string, dir string) (windows.Handle, uint32, error)

// Start checks setup, starts agentbox-runner as the sandbox user and the
// command inside it, and returns once the command runs. Errors that mean
// setup is missing or outdated wrap setup.ErrMissing / setup.ErrOutdated.
func Start(ctx context.Context, s Spec) (*Process, error) {
	login, err := setup.LoadLogin(s.Network, s.ProxyPorts)
	if err != nil {
		return nil, &StartError{Code: exitcode.SandboxFailure, Err: err}
	}
	// Without an interactive window station (a service, an OpenSSH
	// session, session 0) the runner, a new logon, could not connect to
	// ours and would die initialising USER32 (0xC0000142): give it a
	// station and desktop of our making, granted to us and the sandbox
	// group, for as long as it runs.
	var desk *winapi.Desktop
	if ni, err := winapi.NonInteractive(); err != nil {
		return nil, &StartError{Code: exitcode.SandboxFailure, Err: fmt.Errorf("window station: %w", err)}
	} else if ni {
		if desk, err = runnerDesktop(login.GroupSID); err != nil {
			return nil, &StartError{Code: exitcode.SandboxFailure, Err: fmt.Errorf(
				"this session has no interactive window station (a service, an OpenSSH session or a scheduled task) and agentbox could not create one for agentbox-runner: %w; "+
					"run agentbox from an interactive desktop session, or use the unelevated mode", err)}
		}
	}
	launch := func(args []string, dir string) (windows.Handle, uint32, error) {
		name := ""
		if desk != nil {
			name = desk.Name
		}
		return logonLaunch(login, args, dir, name)
	}
	p, err := start(ctx, s, login.SID, launch)
	if err != nil {
		desk.Close()
		return nil, err
	}
	if desk != nil {
		go func() { <-p.done; desk.Close() }()
	}
	return p, nil
}

// runnerDesktop is a window station and desktop granted to this process's
// logon SID and the sandbox group.
func runnerDesktop(groupSID string) (*winapi.Desktop, error) {
	self, err := winapi.OpenSelfToken()
	if err != nil {
		return nil, err
	}
	defer self.Close()
	logon, err := winapi.LogonSID(self)
	if err != nil {
		return nil, err
	}
	return winapi.NewDesktop(logon, groupSID)
}

func start(ctx context.Context, s Spec, userSID string, launch launcher) (*Process, error) {
	fail := func(err error) (*Process, error) {
		var se *StartError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, &StartError{Code: exitcode.SandboxFailure, Err: err}
	}
	if len(s.SIDs) == 0 {
		return fail(errors.New("elevated sandbox: no sandbox SID for the write-restricted token"))
	}
	name, err := ipc.PipeName()
	if err != nil {
		return fail(err)
	}
	sddl, err := ipc.PipeSDDL(userSID)
	if err != nil {
		return fail(err)
	}
	l, err := ipc.Listen(name, sddl)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	h, pid, err := launch(RunnerArgs(name, uint32(os.Getpid())), s.Dir)
	if err != nil {
		return fail(fmt.Errorf("starting agentbox-runner: %w", err))
	}
	kill := func() {
		windows.TerminateProcess(h, exitcode.SandboxFailure)
		windows.CloseHandle(h)
	}
	conn, err := l.Accept(ConnectTimeout, pid)
	if err != nil {
		kill()
		return fail(fmt.Errorf("agentbox-runner did not connect: %w", err))
	}
	p := &Process{conn: conn, runner: h, done: make(chan struct{}),
		ctl: make(chan outFrame, 1), data: make(chan outFrame, 4)}
	req := ipc.Spawn{Path: s.Path, Args: s.Args, CmdLine: s.CmdLine, Dir: s.Dir, Env: s.Env, SIDs: s.SIDs, StdinOpen: s.Stdin != nil}
	if err := ipc.Send(conn, ipc.TypeSpawn, req); err != nil {
		conn.Close()
		kill()
		return fail(err)
	}
	conn.SetReadDeadline(time.Now().Add(ReadyTimeout))
	f, err := ipc.ReadFrame(conn)
	conn.SetReadDeadline(time.Time{})
	if err == nil && f.Type == ipc.TypeError {
		var ie ipc.Error
		if err := f.Decode(&ie); err != nil {
			ie = ipc.Error{Code: ipc.CodeProtocol, Message: err.Error()}
		}
		conn.Close()
		kill()
		return nil, startErrorFrom(&ie)
	}
	var ready ipc.Ready
	if err == nil && f.Type != ipc.TypeReady {
		err = fmt.Errorf("runner sent %s before ready", f.Type)
	}
	if err == nil {
		err = f.Decode(&ready)
	}
	if err != nil {
		conn.Close()
		kill()
		return fail(fmt.Errorf("agentbox-runner handshake: %w", err))
	}
	p.pid = ready.PID
	p.Job, p.JobUI = ready.Job, ready.UI
	if len(s.ProxyPorts) > 0 {
		// The allow-list proxy serves only the run's processes: it needs
		// the job, which lives in the runner.
		if p.job, err = dupJob(h, ready.JobHandle); err != nil {
			conn.Close()
			kill()
			return fail(fmt.Errorf("the allow-list proxy needs the command's job to tell the run's connections from others: %w", err))
		}
	}
	go p.write()
	if s.Stdin != nil {
		go p.feed(s.Stdin)
	}
	go p.read(s.Stdout, s.Stderr)
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				p.Kill()
			case <-p.done:
			}
		}()
	}
	return p, nil
}

// write sends queued frames, control frames first, until the pipe
// breaks or the command is done.
func (p *Process) write() {
	for {
		var f outFrame
		select {
		case f = <-p.ctl:
		case <-p.done:
			return
		default:
			select {
			case f = <-p.ctl:
			case f = <-p.data:
			case <-p.done:
				return
			}
		}
		if ipc.Send(p.conn, f.typ, f.payload) != nil {
			return
		}
	}
}

// feed queues the command's stdin, one chunk per frame (each chunk its
// own buffer: it may wait in the queue while the next is read).
func (p *Process) feed(r io.Reader) {
	queue := func(f outFrame) bool {
		select {
		case p.data <- f:
			return true
		case <-p.done:
			return false
		}
	}
	for {
		buf := make([]byte, ipc.MaxChunk)
		n, err := r.Read(buf)
		if n > 0 && !queue(outFrame{ipc.TypeStdin, ipc.Data{B: buf[:n]}}) {
			return
		}
		if err != nil {
			queue(outFrame{typ: ipc.TypeCloseStdin})
			return
		}
	}
}

func (p *Process) read(stdout, stderr io.Writer) {
	finish := func(code uint32, err error) {
		p.code, p.err = code, err
		p.conn.Close()
		// The runner exits right after the exit frame; reap its handle.
		p.mu.Lock()
		windows.WaitForSingleObject(p.runner, 5000)
		windows.CloseHandle(p.runner)
		p.runner = 0
		p.mu.Unlock()
		close(p.done)
	}
	for {
		f, err := ipc.ReadFrame(p.conn)
		if err != nil {
			finish(0, fmt.Errorf("elevated sandbox: lost agentbox-runner: %w", err))
			return
		}
		switch f.Type {
		case ipc.TypeStdout, ipc.TypeStderr:
			var d ipc.Data
			if err := f.Decode(&d); err != nil {
				finish(0, err)
				return
			}
			w := stdout
			if f.Type == ipc.TypeStderr {
				w = stderr
			}
			if w != nil {
				w.Write(d.B)
			}
		case ipc.TypeExit:
			var e ipc.Exit
			err := f.Decode(&e)
			finish(e.Code, err)
			return
		case ipc.TypeError:
			var ie ipc.Error
			f.Decode(&ie)
			finish(0, &ie)
			return
		default:
			finish(0, fmt.Errorf("elevated sandbox: unexpected %s frame", f.Type))
			return
		}
	}
}

// Wait blocks until the command's whole tree is gone and returns its exit
// code.
func (p *Process) Wait() (uint32, error) {
	<-p.done
	return p.code, p.err
}

// Kill ends the whole tree: it asks the runner to terminate the job and,
// should the runner not answer within KillGrace, kills the runner, whose
// kill-on-close job then takes the tree with it. The fallback timer starts
// before the request is queued, and queuing never blocks: Kill returns at
// once, whatever state the pipe is in.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.killOnce.Do(func() {
		go func() {
			select {
			case <-p.done:
			case <-time.After(KillGrace):
				p.mu.Lock()
				if p.runner != 0 {
					windows.TerminateProcess(p.runner, exitcode.SandboxFailure)
				}
				p.mu.Unlock()
			}
		}()
	})
	select {
	case p.ctl <- outFrame{typ: ipc.TypeTerminate}:
	default: // a terminate is already waiting to go out
	}
	return nil
}

const (
	_LOGON_WITH_PROFILE = 0x1
)

// logonLaunch starts the runner as the sandbox user. LOGON_WITH_PROFILE
// loads the user's profile so tools find a home and %TEMP%. The
// environment is the sandbox user's own (env nil); the command's
// environment travels in the spawn frame instead.
func logonLaunch(login *setup.Login, args []string, dir, desktop string) (windows.Handle, uint32, error) {
	user, err := windows.UTF16PtrFromString(login.User)
	if err != nil {
		return 0, 0, err
	}
	pw, err := windows.UTF16FromString(login.Password)
	if err != nil {
		return 0, 0, err
	}
	defer clear(pw)
	app, err := windows.UTF16PtrFromString(login.Runner)
	if err != nil {
		return 0, 0, err
	}
	parts := []string{winenv.QuoteArg(login.Runner)}
	for _, a := range args {
		parts = append(parts, winenv.QuoteArg(a))
	}
	cmd, err := windows.UTF16FromString(strings.Join(parts, " "))
	if err != nil {
		return 0, 0, err
	}
	var d *uint16
	if dir != "" {
		if d, err = windows.UTF16PtrFromString(dir); err != nil {
			return 0, 0, err
		}
	}
	how := runnerLaunch()
	si := windows.StartupInfo{Cb: uint32(unsafe.Sizeof(windows.StartupInfo{})), Flags: how.StartupFlags, ShowWindow: how.ShowWindow}
	if desktop != "" {
		if si.Desktop, err = windows.UTF16PtrFromString(desktop); err != nil {
			return 0, 0, err
		}
	}
	var pi windows.ProcessInformation
	// No error dialogs from the runner (it has no desktop to show them on).
	old := windows.SetErrorMode(windows.SEM_FAILCRITICALERRORS | windows.SEM_NOGPFAULTERRORBOX)
	err = createProcessWithLogon(user, windows.StringToUTF16Ptr("."), &pw[0], _LOGON_WITH_PROFILE, app, &cmd[0],
		how.CreationFlags, nil, d, &si, &pi)
	windows.SetErrorMode(old)
	if err != nil {
		return 0, 0, os.NewSyscallError("CreateProcessWithLogonW("+login.User+")", err)
	}
	windows.CloseHandle(pi.Thread)
	return pi.Process, pi.ProcessId, nil
}
