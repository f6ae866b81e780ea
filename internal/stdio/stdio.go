// Package stdio holds Relay, the one connection of a child's standard
// streams to the caller's readers and writers for every backend, in the
// manner of os/exec, and Buffer, a buffer two output copies may share.
//
// A file the backend's Pass accepts is handed to the child as it is;
// anything else goes through a pipe whose other end this process copies.
// The rules, which the four relays this replaced did not all agree on:
//
//   - nil is the null device.
//   - Stdout and Stderr that are the same writer share one pipe, so
//     their order is kept; on Unix so do two relayed files of one inode
//     (`>> log 2>&1`).
//   - [Relay.Wait] returns once every output copy has drained, or
//     WaitDelay after the child ended, when it closes the pipes and
//     leaves a copy stuck in the caller's writer behind (os/exec).
//   - An output copy that fails closes its pipe, so the child's later
//     writes fail instead of blocking; Wait returns the first such error
//     and the caller reports it only when the command otherwise
//     succeeded (os/exec).
//   - Input is copied until the reader ends (the child then sees EOF) or
//     Wait has returned. It is never waited for and its errors are
//     ignored: a command need not read all of its input. On Unix an
//     *os.File is read only when poll says it has data, so no read of
//     the caller's terminal is left pending once the child is gone.
package stdio

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// Config is what a Relay connects.
type Config struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Pass reports whether the child may be given f itself; f is
	// relayed through a pipe otherwise. nil passes every file, as
	// os/exec does.
	Pass func(f *os.File) bool
	// PipeSize, when positive, asks the kernel for output pipes of that
	// many bytes (Linux; best effort): fewer wake-ups for a fast writer.
	PipeSize int
}

// Relay is a child's standard streams: the files to give it, and the
// copies between the pipes among them and the caller's streams.
type Relay struct {
	child   [3]*os.File
	own     []*os.File // child ends opened here; CloseChild closes them
	parent  []*os.File // our ends of the output pipes
	outputs []output
	stdin   io.Reader // copied into stdinW by StartInput
	stdinW  *os.File

	wg     sync.WaitGroup // output copies and Go's functions
	inputs sync.WaitGroup
	mu     sync.Mutex
	err    error // the first output copy's error

	// stopR becomes readable when Wait is done: it wakes the input
	// copies that poll a file (copy_unix.go). nil until one needs it.
	stopR, stopW *os.File
	stopOnce     sync.Once
}

type output struct {
	w io.Writer
	r *os.File
}

// New opens the pipes for c. Give the child [Relay.Files], then call
// CloseChild once it has them, Start (or StartOutput and StartInput),
// and Wait when it has ended; Abort if it never started.
func New(c Config) (r *Relay, err error) {
	r = &Relay{}
	defer func() {
		if err != nil {
			r.Abort()
			r = nil
		}
	}()
	pass := c.Pass
	if pass == nil {
		pass = func(*os.File) bool { return true }
	}
	f, isFile := c.Stdin.(*os.File)
	switch {
	case c.Stdin == nil:
		if r.child[0], err = r.devNull(os.O_RDONLY); err != nil {
			return nil, err
		}
	case isFile && pass(f):
		r.child[0] = f
	default:
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		r.child[0], r.stdinW, r.stdin = pr, pw, c.Stdin
		r.own = append(r.own, pr)
		if isFile {
			if err := r.needStop(); err != nil {
				return nil, err
			}
		}
	}
	relayed := len(r.outputs)
	if r.child[1], err = r.output(c.Stdout, pass, c.PipeSize); err != nil {
		return nil, err
	}
	stdoutRelayed := len(r.outputs) > relayed
	switch {
	case c.Stderr != nil && interfaceEqual(c.Stderr, c.Stdout):
		r.child[2] = r.child[1]
	case stdoutRelayed && sameFile(c.Stderr, c.Stdout) && !pass(c.Stderr.(*os.File)):
		r.child[2] = r.child[1]
	default:
		if r.child[2], err = r.output(c.Stderr, pass, c.PipeSize); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Relay) devNull(flag int) (*os.File, error) {
	f, err := openDevNull(flag)
	if err != nil {
		return nil, err
	}
	r.own = append(r.own, f)
	return f, nil
}

func (r *Relay) output(w io.Writer, pass func(*os.File) bool, size int) (*os.File, error) {
	if w == nil {
		return r.devNull(os.O_WRONLY)
	}
	if f, ok := w.(*os.File); ok && pass(f) {
		return f, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if size > 0 {
		setPipeSize(pw, size)
	}
	r.own = append(r.own, pw)
	r.parent = append(r.parent, pr)
	r.outputs = append(r.outputs, output{w, pr})
	return pw, nil
}

// interfaceEqual is a == b without the panic of uncomparable dynamic
// types, as os/exec compares Stdout and Stderr.
func interfaceEqual(a, b any) (eq bool) {
	defer func() { recover() }()
	return a == b
}

// Files are the child's stdin, stdout and stderr.
func (r *Relay) Files() [3]*os.File { return r.child }

// CloseChild closes this process's copies of the child's ends once the
// child has its own, so that the output copies see EOF when it is gone.
func (r *Relay) CloseChild() {
	for _, f := range r.own {
		f.Close()
	}
	r.own = nil
}

// Start starts every copy.
func (r *Relay) Start() {
	r.StartOutput()
	r.StartInput()
}

// StartOutput starts the output copies.
func (r *Relay) StartOutput() {
	for _, o := range r.outputs {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			err := copyOut(o.w, o.r)
			// Closed now, the pipe fails the child's next write (EPIPE)
			// rather than filling up and blocking it.
			o.r.Close()
			if err != nil && !errors.Is(err, os.ErrClosed) {
				r.mu.Lock()
				if r.err == nil {
					r.err = err
				}
				r.mu.Unlock()
			}
		}()
	}
	r.outputs = nil
}

// StartInput starts copying stdin; a caller that may still retry the
// child starts it last, so that a failed start has consumed no input.
func (r *Relay) StartInput() {
	if r.stdin != nil {
		r.CopyIn(r.stdinW, r.stdin)
		r.stdin = nil
	}
}

// DropInput gives up the stdin relay: the child's stdin ends at once.
// For a child that opened its input itself.
func (r *Relay) DropInput() {
	if r.stdinW != nil {
		r.stdin = nil
		r.stdinW.Close()
	}
}

// CopyIn copies src into dst, as stdin is copied: until src ends or Wait
// is done, then dst is closed.
func (r *Relay) CopyIn(dst *os.File, src io.Reader) {
	if _, ok := src.(*os.File); ok {
		if err := r.needStop(); err != nil {
			dst.Close()
			return
		}
	}
	r.inputs.Add(1)
	go func() {
		defer r.inputs.Done()
		defer dst.Close()
		copyIn(dst, src, r.stopR)
	}()
}

// Go runs fn, another copy of the child's output, and Wait waits for it
// as for the others.
func (r *Relay) Go(fn func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
}

// Wait waits, once the child has ended, for the output copies to drain,
// for at most delay when it is positive (something outside the child's
// tree may hold a pipe), then stops the input copies. It returns the
// first error an output copy had.
func (r *Relay) Wait(delay time.Duration) error {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-done:
		case <-t.C:
			for _, f := range r.parent {
				f.Close()
			}
		}
		t.Stop()
	} else {
		<-done
	}
	r.stop()
	go func() {
		// Nothing polls stopR once the input copies are done.
		r.inputs.Wait()
		if r.stopR != nil {
			r.stopR.Close()
		}
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// stop ends the input copies: those polling wake on stopR, the others
// fail their next write.
func (r *Relay) stop() {
	r.stopOnce.Do(func() {
		if r.stopW != nil {
			r.stopW.Close()
		}
		if r.stdinW != nil {
			r.stdinW.Close()
		}
	})
}

// Abort undoes New when the child never started.
func (r *Relay) Abort() {
	r.CloseChild()
	for _, f := range r.parent {
		f.Close()
	}
	r.outputs, r.stdin = nil, nil
	r.stop()
	if r.stopR != nil {
		r.stopR.Close()
	}
}
