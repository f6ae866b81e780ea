// Package sandbox runs commands under a [policy.Policy], with an API shaped
// like os/exec: build a [Cmd] with [CommandContext], then Start and Wait, or
// Run. Cancelling the context kills the whole process tree, not just the
// direct child.
//
// # Backends
//
// Linux uses namespaces, mounts, Landlock and seccomp (see internal/linux);
// Windows uses a synthetic SID, ACLs and a write-restricted token
// (internal/windows); macOS uses a generated Seatbelt profile
// (internal/darwin). A policy restriction a backend cannot apply is an
// error from Start: nothing runs.
//
// # Sessions
//
// A [Session] prepares a policy once for many commands, each as isolated
// as a lone Cmd; see its documentation for what they share.
//
// # Linux re-exec
//
// On Linux the backend re-executes the current binary (/proc/self/exe) to
// build the sandbox before running the command. The re-executed process
// is recognised by a marker in its argv and environment that only
// agentbox's launcher sets, and becomes the sandbox's init stage from a
// package init function of this package's Linux backend, before the
// program's main runs: calling [Main] is not needed. Init functions of
// packages that Go orders before that backend (its own dependencies, and
// packages whose import path sorts earlier and that do not import it) do
// run first in the init stage: keep them free of side effects such as
// starting goroutines that write files or open connections.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/stdio"

	"github.com/agentbox/agentbox/policy"
)

// ErrUnsupported is wrapped by errors for features a platform lacks. It
// wraps [errors.ErrUnsupported], so either works with [errors.Is].
var ErrUnsupported = fmt.Errorf("sandbox: %w on this platform", errors.ErrUnsupported)

// Cmd is a command to run inside the sandbox. Fields mirror exec.Cmd.
type Cmd struct {
	// Policy is what the command may do. Required.
	Policy *policy.Policy
	// Path is the command to run; it is looked up in PATH inside the
	// sandbox when it contains no separator.
	Path string
	// Args holds the command line, including the command as Args[0].
	Args []string
	// Env is the environment; nil means the current process's. Start
	// replaces it with what the policy lets through
	// ([policy.Policy.FilterEnv]: secret-looking variables withheld,
	// shell_environment_policy applied); the report names the rest.
	Env []string
	// Dir is the command's working directory inside the sandbox. Empty
	// means the policy's workspace (Policy.Cwd); a relative Dir is
	// relative to it. It changes nothing about what the command may
	// write.
	Dir string
	// Stdin, Stdout and Stderr as in exec.Cmd. A terminal stays a
	// terminal. On Linux an *os.File that is a pipe or a connected unix
	// socket is passed straight through; a host file or terminal is
	// relayed (a pipe, or a pseudo-terminal of the sandbox's own) so the
	// command cannot change its metadata.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// WaitDelay bounds how long Wait waits for I/O after the command exits
	// or is killed, as in exec.Cmd.
	WaitDelay time.Duration
	// Cancel, when set, is called instead of killing the whole tree when
	// the context ends, as in exec.Cmd (for example to send SIGTERM with
	// [Cmd.Signal] first). If the command is still running WaitDelay
	// later (with a non-zero WaitDelay), the tree is killed.
	Cancel func() error
	// Diagnostics receives the one-line notes a backend prints about what
	// it could not enforce (for example advisory-only network blocking).
	// nil discards them.
	Diagnostics io.Writer

	// Process is the started command, set by Start.
	Process *Process
	// ProcessState is set by Wait.
	ProcessState *Status
	// Report is set by Wait: the exit code and, with an allow-list,
	// every destination the command asked agentbox's proxy for; with
	// the network off (Linux, with a network namespace), what the
	// command tried: the names it looked up, the hosts it asked the
	// refusing proxy for, the addresses it could not connect to.
	Report *RunReport

	// Request, for a command of a [Session], asks for more than the
	// session's policy allows, for this command: Start asks the
	// session's Approve hook, and the command runs under the policy
	// widened by exactly the request, or not at all (a *StartError
	// whose Err is a *RefusedError). Nothing the command does can widen
	// it further.
	Request *Request

	ctx        context.Context
	session    *Session       // set by Session.Command
	sessionPol *policy.Policy // the Policy Session.Command set
	guard      guardHold      // this run's part in the post-run checks
	proc       *proc
	programs   programDirs // the private directories of programs, watched
	done       chan struct{}
	withheld   []string // names of Env's variables the policy withheld
	started    bool
	finished   bool
	mu         sync.Mutex
}

// Status is how a sandboxed command ended.
type Status struct {
	// Code is the exit code when the command exited normally.
	Code int
	// Signal is the number of the signal that killed it, or 0.
	Signal int
	// TimedOut is set when the context's deadline ended the command.
	TimedOut bool
}

// ExitCode follows the shell convention: the exit code, or 128+N when the
// command died of signal N.
func (s *Status) ExitCode() int {
	if s.Signal != 0 {
		return 128 + s.Signal
	}
	return s.Code
}

// Success reports whether the command exited with status 0.
func (s *Status) Success() bool { return s.Signal == 0 && s.Code == 0 }

// String describes the end: "exit status N", "signal N" or "timed out".
func (s *Status) String() string {
	switch {
	case s.TimedOut:
		return "timed out"
	case s.Signal != 0:
		return "signal " + strconv.Itoa(s.Signal)
	default:
		return "exit status " + strconv.Itoa(s.Code)
	}
}

// ExitError reports a command that ran and did not exit 0.
type ExitError struct {
	*Status
	// Stderr holds captured standard error when Output was used.
	Stderr []byte
}

// Error is the Status's description.
func (e *ExitError) Error() string { return e.Status.String() }

// CheckError reports a command that ran and left behind, in a writable
// root, something the user's own programs would run or obey afterwards
// (a git repository it made, say) that agentbox could not move out of
// their way. The run counts as failed by agentbox ([CodeSandboxFailure]);
// Err names the paths and what to check.
type CheckError struct {
	// Status is how the command itself ended.
	Status *Status
	Err    error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// StartError is a failure to start the command inside the sandbox. Code is
// the exit status the CLI reports for it: [CodeSandboxFailure] (agentbox
// could not build or enforce the sandbox), [CodeNotExecutable] or
// [CodeNotFound]. Err is the cause, with its chain.
type StartError = exitcode.Error

// startError is err as a *StartError: the one it carries (a backend's 126
// or 127, say), or else a 125 with err as the cause.
func startError(err error) *StartError {
	var se *StartError
	if errors.As(err, &se) {
		return se
	}
	return &StartError{Code: CodeSandboxFailure, Err: err}
}

// Exit codes for failures of agentbox itself, as [StartError].Code: the
// shell's conventions, which agentbox's CLI exits with.
const (
	// CodeSandboxFailure (125): the sandbox could not be built or a
	// restriction the policy asks for could not be enforced; nothing ran.
	CodeSandboxFailure = exitcode.SandboxFailure
	// CodeNotExecutable (126): the command exists but cannot be executed.
	CodeNotExecutable = exitcode.NotExecutable
	// CodeNotFound (127): the command was not found.
	CodeNotFound = exitcode.NotFound
)

// Process is a started command, as [Cmd.Process]. It has what os/exec
// callers use of an [os.Process] (Pid, Signal, Kill) but no Wait or
// Release: [Cmd.Wait] waits for the command and everything it started,
// and releases them.
type Process struct {
	// Pid is the host process ID of the process agentbox started for the
	// command, for logs and process listings. On Linux it is the
	// sandbox's init stage (PID 1 of the command's pid namespace: the
	// command's parent, which relays signals to it; in degraded mode, the
	// reaper stage above the init), not the command itself, and 0 for a
	// Session's commands, which the session's own init starts. On macOS
	// and in danger-full-access it is the command (sandbox-exec becomes
	// the command it runs); on Windows, the command's process. Signal the
	// command through [Process.Signal], not this ID: what a raw signal
	// does to the init stage is not part of the API.
	Pid int

	proc *proc
}

// Signal sends sig to the command, as [Cmd.Signal] does. On Linux the
// sandbox's init relays SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
// SIGUSR2, SIGWINCH and SIGCONT to the command (a terminating one
// followed by SIGCONT, so that a stopped command gets it) and ignores
// the others, but for os.Kill, which ends the sandbox. On macOS and in
// danger-full-access the signal goes to the command alone, not to the
// processes it started. On Windows os.Kill and os.Interrupt end the whole
// tree and other signals are [ErrUnsupported].
func (p *Process) Signal(sig os.Signal) error { return p.proc.Signal(sig) }

// Kill ends the command and every process it started, at once; unlike
// [os.Process.Kill], not the one process alone. [Cmd.Wait] still has to
// be called.
func (p *Process) Kill() error { return p.proc.Kill() }

// Command returns a Cmd for name with args under pol.
func Command(pol *policy.Policy, name string, args ...string) *Cmd {
	return &Cmd{Policy: pol, Path: name, Args: append([]string{name}, args...)}
}

// CommandContext is Command with a context whose end kills the whole tree.
func CommandContext(ctx context.Context, pol *policy.Policy, name string, args ...string) *Cmd {
	if ctx == nil {
		panic("sandbox: nil Context")
	}
	c := Command(pol, name, args...)
	c.ctx = ctx
	return c
}

// Start starts the command; it does not wait for it.
func (c *Cmd) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("sandbox: already started")
	}
	c.started = true
	if c.Policy == nil {
		return &StartError{Code: CodeSandboxFailure, Err: errors.New("sandbox: no policy")}
	}
	if c.Path == "" || len(c.Args) == 0 {
		return &StartError{Code: CodeSandboxFailure, Err: errors.New("sandbox: no command")}
	}
	if c.ctx != nil {
		if err := c.ctx.Err(); err != nil {
			return err
		}
	}
	if c.session != nil {
		if c.Policy != c.sessionPol {
			return &StartError{Code: CodeSandboxFailure, Err: errors.New("sandbox: a session's command must keep the session's policy")}
		}
		pol, err := c.session.policyFor(c.ctx, c.Request, c.Args)
		if err != nil {
			return err
		}
		c.Policy = pol
	} else if c.Request != nil {
		return &StartError{Code: CodeSandboxFailure, Err: &RefusedError{Request: *c.Request, Err: errors.New("only a Session's commands can ask for more (Cmd.Request)")}}
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	// The first thing done with the environment: no backend, session or
	// helper sees a withheld variable.
	c.Env, c.withheld = c.Policy.FilterEnv(c.Env)
	if err := checkEgress(c.Policy); err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	if err := checkPorts(c.Policy); err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	if err := checkPrivatePath(c.Policy, c.Env); err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	c.programs = watchPrograms(c.Policy)
	if err := preflight(c); err != nil {
		return err
	}
	if c.Policy.Mode() != policy.DangerFullAccess {
		if err := c.beginGuard(); err != nil {
			return err
		}
	}
	p := newProc()
	var err error
	if c.session != nil {
		err = c.session.start(c, p)
	} else {
		err = start(c, p)
	}
	if err != nil {
		// What the backend took before it failed is released first:
		// the checks then see the roots as the run left them.
		cerr := p.cleanup.run()
		if gerr := errors.Join(cerr, c.endGuard()); gerr != nil {
			return &StartError{Code: CodeSandboxFailure, Err: errors.Join(err, gerr)}
		}
		return err
	}
	c.proc = p
	c.Process = &Process{Pid: p.pid, proc: p}
	c.done = make(chan struct{})
	if c.ctx != nil && c.ctx.Done() != nil {
		go c.watchContext()
	}
	return nil
}

// watchContext ends the command when its context ends: through Cancel
// when set (and the tree is killed WaitDelay later if that is not
// enough), else by killing the whole tree at once.
func (c *Cmd) watchContext() {
	select {
	case <-c.ctx.Done():
	case <-c.done:
		return
	}
	if c.Cancel == nil {
		c.proc.Kill()
		return
	}
	c.Cancel()
	if c.WaitDelay <= 0 {
		return
	}
	t := time.NewTimer(c.WaitDelay)
	defer t.Stop()
	select {
	case <-t.C:
		c.proc.Kill()
	case <-c.done:
	}
}

// workDir is where the command starts: Dir, relative to the workspace.
func (c *Cmd) workDir() string {
	switch {
	case c.Dir == "":
		return c.Policy.Cwd()
	case filepath.IsAbs(c.Dir):
		return filepath.Clean(c.Dir)
	}
	return filepath.Join(c.Policy.Cwd(), c.Dir)
}

// Signal sends sig to the sandboxed command (not to agentbox's helpers);
// see [Process.Signal] for what each platform delivers.
func (c *Cmd) Signal(sig os.Signal) error {
	if c.proc == nil {
		return errors.New("sandbox: not started")
	}
	return c.proc.Signal(sig)
}

// Wait waits for the command and every process it started to be gone.
func (c *Cmd) Wait() error {
	if c.proc == nil {
		return errors.New("sandbox: not started")
	}
	if c.finished {
		return errors.New("sandbox: Wait was already called")
	}
	c.finished = true
	st, err := c.proc.Wait()
	close(c.done)
	for _, n := range c.programs.notes() {
		c.diag("%s", n)
	}
	// The command's tree is gone: whatever it left in the writable roots
	// is checked now (by this run, or by the last one out of them).
	gerr := c.endGuard()
	if err != nil {
		return errors.Join(err, gerr)
	}
	if c.ctx != nil && errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
		st.TimedOut = true
	}
	c.ProcessState = st
	code := st.ExitCode()
	if gerr != nil {
		code = CodeSandboxFailure
	}
	c.Report = newRunReport(c.Policy, code)
	c.Report.Environment.Withheld = nonNil(c.withheld)
	sec := c.proc.sections
	c.Report.addNetwork(sec.network)
	c.Report.Network.Published = sec.published
	c.Report.SetFilesystem(sec.files, sec.filesUnavailable)
	if c.session == nil && c.Report.Filesystem.Unavailable == "" && (len(c.Policy.Hidden()) > 0 || len(c.Policy.HideRules()) > 0) {
		c.Report.Filesystem.ReadsUnavailable = lonelyReads
	}
	c.Report.SetSuggest()
	if gerr != nil {
		return &CheckError{Status: st, Err: gerr}
	}
	if !st.Success() {
		return &ExitError{Status: st}
	}
	return nil
}

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("sandbox: Stdout already set")
	}
	var stdout, stderr bytes.Buffer
	c.Stdout = &stdout
	captureErr := c.Stderr == nil
	if captureErr {
		c.Stderr = &stderr
	}
	err := c.Run()
	if ee, ok := err.(*ExitError); ok && captureErr {
		ee.Stderr = stderr.Bytes()
	}
	return stdout.Bytes(), err
}

// CombinedOutput runs the command and returns stdout and stderr together.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("sandbox: Stdout or Stderr already set")
	}
	var b stdio.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
}

func (c *Cmd) diag(format string, args ...any) {
	if c.Diagnostics != nil {
		fmt.Fprintf(c.Diagnostics, "agentbox: "+format+"\n", args...)
	}
}
