package elevated

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/exitcode"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/ipc"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/internal/windows/winenv"
)

// RunnerMain is agentbox-runner's main; it returns the exit code. Running
// as the sandbox user, it connects to agentbox's pipe, runs one command
// and reports its exit. Failures before the command runs go back as an
// error frame; if even the pipe cannot be reached they go to stderr.
func RunnerMain(args []string) int {
	pipe, parent, err := ParseRunnerArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitcode.SandboxFailure
	}
	conn, err := ipc.Dial(pipe, ConnectTimeout, parent)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbox-runner:", err)
		return exitcode.SandboxFailure
	}
	defer conn.Close()
	r := &runner{conn: conn}
	code, err := r.run()
	if err != nil {
		var ie *ipc.Error
		if !errors.As(err, &ie) {
			ie = &ipc.Error{Code: ipc.CodeSpawnFailed, Message: err.Error()}
		}
		r.send(ipc.TypeError, ie)
		return exitcode.SandboxFailure
	}
	return int(code)
}

type runner struct {
	conn *os.File
	mu   sync.Mutex // one frame at a time on the pipe
}

func (r *runner) send(typ string, payload any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ipc.Send(r.conn, typ, payload)
}

func (r *runner) run() (uint32, error) {
	r.conn.SetReadDeadline(time.Now().Add(ReadyTimeout))
	f, err := ipc.ReadFrame(r.conn)
	if err != nil {
		return 0, &ipc.Error{Code: ipc.CodeProtocol, Message: err.Error()}
	}
	r.conn.SetReadDeadline(time.Time{})
	if f.Type != ipc.TypeSpawn {
		return 0, &ipc.Error{Code: ipc.CodeProtocol, Message: "first frame is " + f.Type + ", want spawn"}
	}
	var req ipc.Spawn
	if err := f.Decode(&req); err != nil {
		return 0, &ipc.Error{Code: ipc.CodeProtocol, Message: err.Error()}
	}

	// The restricted token comes from our own token (in SpawnConfined):
	// we already are the sandbox user in a fresh logon session, so its
	// logon SID is ours alone. This is why the runner exists: agentbox, as
	// the real user, cannot start a process under another user's
	// restricted token.
	line := winenv.CommandLine{App: req.Path, Line: req.CmdLine}
	if line.Line == "" {
		comspec, _ := winenv.Get(req.Env, "ComSpec")
		if line, err = winenv.Build(req.Path, req.Args, comspec); err != nil {
			return 0, err
		}
	}
	sysroot, _ := winenv.Get(req.Env, "SystemRoot")
	env, err := winenv.Block(req.Env, sysroot)
	if err != nil {
		return 0, err
	}

	var stdinW *os.File
	var stdinR windows.Handle
	if req.StdinOpen {
		pr, pw, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		defer pr.Close()
		stdinR, stdinW = windows.Handle(pr.Fd()), pw
	} else {
		nul, err := os.Open(os.DevNull)
		if err != nil {
			return 0, err
		}
		defer nul.Close()
		stdinR = windows.Handle(nul.Fd())
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return 0, err
	}
	sbx, err := winapi.SpawnConfined(winapi.Confined{
		SIDs: req.SIDs, App: line.App, CmdLine: line.Line, Env: env, Dir: req.Dir,
		Stdin: stdinR, Stdout: windows.Handle(outW.Fd()), Stderr: windows.Handle(errW.Fd()),
	})
	// Our copies of the child's ends must go, or the output pumps never
	// see EOF.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		var ce *winapi.ConfineError
		switch {
		case errors.As(err, &ce) && ce.Stage == "token":
			return 0, &ipc.Error{Code: ipc.CodeToken, Message: err.Error()}
		case errors.As(err, &ce) && ce.Stage != "spawn":
			return 0, err // the desktop or the job
		}
		return 0, spawnError(err)
	}
	// Closing the job (also when this process dies) kills the tree.
	defer sbx.Close()
	proc, job := sbx.Process, sbx.Job
	if err := r.send(ipc.TypeReady, ipc.Ready{PID: proc.Pid, Job: job.Limits.String(), UI: job.Limits.UI, JobHandle: uint64(job.Handle())}); err != nil {
		job.Terminate(exitcode.SandboxFailure)
		return 0, err
	}

	var pumps sync.WaitGroup
	pump := func(src *os.File, typ string) {
		defer pumps.Done()
		defer src.Close()
		buf := make([]byte, ipc.MaxChunk)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if r.send(typ, ipc.Data{B: buf[:n]}) != nil {
					job.Terminate(exitcode.SandboxFailure) // agentbox is gone
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	pumps.Add(2)
	go pump(outR, ipc.TypeStdout)
	go pump(errR, ipc.TypeStderr)
	go r.control(job, stdinW)

	code, err := proc.Wait()
	if err != nil {
		job.Terminate(exitcode.SandboxFailure)
		return 0, err
	}
	// The command is done: whatever it left running dies with it, as a
	// pid namespace does on Linux, so output ends and nothing outlives Wait.
	job.Terminate(code)
	pumps.Wait()
	if err := r.send(ipc.TypeExit, ipc.Exit{Code: code}); err != nil {
		return 0, err
	}
	return code, nil
}

// control handles frames from agentbox while the command runs. A broken
// pipe means agentbox is gone: the tree is killed. The command's stdin is
// written by another goroutine (stdinQueue), so a command that does not
// read its stdin never stops this loop from reading a terminate frame.
func (r *runner) control(job *winapi.Job, stdin *os.File) {
	var q *stdinQueue
	if stdin != nil {
		q = newStdinQueue(StdinQueueMax)
		go q.run(stdin)
		defer q.close()
	}
	for {
		f, err := ipc.ReadFrame(r.conn)
		if err != nil {
			job.Terminate(exitcode.SandboxFailure)
			return
		}
		switch f.Type {
		case ipc.TypeStdin:
			var d ipc.Data
			if f.Decode(&d) == nil && q != nil {
				q.push(d.B)
			}
		case ipc.TypeCloseStdin:
			if q != nil {
				q.close()
			}
		case ipc.TypeTerminate:
			job.Terminate(1)
		}
	}
}

// StdinQueueMax bounds the stdin bytes the runner holds for a command
// that reads slower than agentbox sends. Past it the control loop waits
// for the command to read; agentbox's Kill still ends the tree then, by
// killing the runner after KillGrace.
var StdinQueueMax = 64 << 20

// stdinQueue hands stdin chunks from the control loop to the goroutine
// that writes them into the command's stdin pipe.
type stdinQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	bufs   [][]byte
	size   int
	max    int
	closed bool // no more input: close the pipe once drained
	broken bool // the command's stdin is gone: drop everything
}

func newStdinQueue(max int) *stdinQueue {
	q := &stdinQueue{max: max}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push queues b, waiting while the queue is full.
func (q *stdinQueue) push(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.size >= q.max && !q.broken && !q.closed {
		q.cond.Wait()
	}
	if q.broken || q.closed {
		return
	}
	q.bufs = append(q.bufs, b)
	q.size += len(b)
	q.cond.Broadcast()
}

// close ends the input after what is queued.
func (q *stdinQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// run writes the queue into w, closing w at the end of the input or when
// the command stops reading.
func (q *stdinQueue) run(w *os.File) {
	defer w.Close()
	for {
		q.mu.Lock()
		for len(q.bufs) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.bufs) == 0 {
			q.mu.Unlock()
			return
		}
		b := q.bufs[0]
		q.bufs = q.bufs[1:]
		q.mu.Unlock()
		_, err := w.Write(b)
		q.mu.Lock()
		q.size -= len(b)
		if err != nil {
			q.broken = true
			q.bufs, q.size = nil, 0
		}
		q.cond.Broadcast()
		q.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func spawnError(err error) error {
	code := ipc.CodeSpawnFailed
	switch exitcode.Classify(err) {
	case exitcode.NotFound:
		code = ipc.CodeNotFound
	case exitcode.NotExecutable:
		code = ipc.CodeNotExec
	}
	return &ipc.Error{Code: code, Message: err.Error()}
}
