package ipc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/windows"
)

// ErrTimeout is wrapped by Accept and Dial when the peer did not show up
// in time.
var ErrTimeout = errors.New("ipc: timed out waiting for the pipe peer")

const pipeBuffer = 64 << 10

// Listener is the server end of one runner pipe (one instance only).
type Listener struct {
	name string
	h    windows.Handle
}

// Listen creates the named pipe name with security descriptor sddl (see
// [PipeSDDL]). The pipe is duplex, byte mode, a single instance, and
// rejects remote clients.
func Listen(name, sddl string) (*Listener, error) {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return nil, fmt.Errorf("ipc: pipe security descriptor %q: %w", sddl, err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafeSizeofSA)
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateNamedPipe(n,
		windows.PIPE_ACCESS_DUPLEX|windows.FILE_FLAG_OVERLAPPED|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		1, pipeBuffer, pipeBuffer, 0, sa)
	runtime.KeepAlive(sd)
	if err != nil {
		return nil, &os.PathError{Op: "CreateNamedPipe", Path: name, Err: err}
	}
	return &Listener{name: name, h: h}, nil
}

// Name is the pipe's path.
func (l *Listener) Name() string { return l.name }

// Close closes the pipe if Accept has not handed it out.
func (l *Listener) Close() error {
	if l.h == windows.InvalidHandle {
		return nil
	}
	err := windows.CloseHandle(l.h)
	l.h = windows.InvalidHandle
	return err
}

// Accept waits up to timeout for a client and checks that the client is
// process wantPID (the runner we started), so a process that raced to the
// pipe is refused. It returns the connected pipe as an *os.File that
// supports deadlines (Go associates overlapped handles with its poller).
// The Listener is spent afterwards, whatever the outcome.
func (l *Listener) Accept(timeout time.Duration, wantPID uint32) (*os.File, error) {
	if l.h == windows.InvalidHandle {
		return nil, errors.New("ipc: listener closed")
	}
	h := l.h
	l.h = windows.InvalidHandle
	if err := connect(h, timeout); err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	var pid uint32
	if err := windows.GetNamedPipeClientProcessId(h, &pid); err != nil {
		windows.CloseHandle(h)
		return nil, os.NewSyscallError("GetNamedPipeClientProcessId", err)
	}
	if pid != wantPID {
		windows.DisconnectNamedPipe(h)
		windows.CloseHandle(h)
		return nil, fmt.Errorf("ipc: pipe client is process %d, not the runner (%d); refused", pid, wantPID)
	}
	return os.NewFile(uintptr(h), l.name), nil
}

// connect runs an overlapped ConnectNamedPipe bounded by timeout. Codex's
// runner client waits forever here; a runner that never starts (logon
// failure, antivirus) must not hang agentbox.
func connect(h windows.Handle, timeout time.Duration) error {
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return os.NewSyscallError("CreateEvent", err)
	}
	defer windows.CloseHandle(ev)
	ov := &windows.Overlapped{HEvent: ev}
	err = windows.ConnectNamedPipe(h, ov)
	switch err {
	case nil, windows.ERROR_PIPE_CONNECTED:
		return nil
	case windows.ERROR_IO_PENDING:
	default:
		return os.NewSyscallError("ConnectNamedPipe", err)
	}
	ms := uint32(timeout / time.Millisecond)
	ev2, werr := windows.WaitForSingleObject(ev, ms)
	var done uint32
	if werr == nil && ev2 == windows.WAIT_OBJECT_0 {
		if err := windows.GetOverlappedResult(h, ov, &done, false); err != nil {
			return os.NewSyscallError("ConnectNamedPipe", err)
		}
		return nil
	}
	// Cancel and wait for the cancellation to land before ov goes away.
	windows.CancelIoEx(h, ov)
	windows.GetOverlappedResult(h, ov, &done, true)
	runtime.KeepAlive(ov)
	if werr != nil {
		return os.NewSyscallError("WaitForSingleObject", werr)
	}
	return fmt.Errorf("ipc: no client on %s after %v: %w", "pipe", timeout, ErrTimeout)
}

// Dial opens the client end of pipe name, retrying until timeout while the
// pipe does not exist yet or is busy. If wantServerPID is non-zero the
// server must be that process (agentbox passes its PID to the runner), so
// the runner never talks to a squatter.
func Dial(name string, timeout time.Duration, wantServerPID uint32) (*os.File, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		// SECURITY_IDENTIFICATION: the server may learn who we are but
		// cannot act as us.
		h, err := windows.CreateFile(n, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil,
			windows.OPEN_EXISTING, windows.FILE_FLAG_OVERLAPPED|windows.SECURITY_SQOS_PRESENT|windows.SECURITY_IDENTIFICATION, 0)
		if err == nil {
			if wantServerPID != 0 {
				var pid uint32
				if err := windows.GetNamedPipeServerProcessId(h, &pid); err != nil {
					windows.CloseHandle(h)
					return nil, os.NewSyscallError("GetNamedPipeServerProcessId", err)
				}
				if pid != wantServerPID {
					windows.CloseHandle(h)
					return nil, fmt.Errorf("ipc: pipe server is process %d, not agentbox (%d); refused", pid, wantServerPID)
				}
			}
			return os.NewFile(uintptr(h), name), nil
		}
		if err != windows.ERROR_FILE_NOT_FOUND && err != windows.ERROR_PIPE_BUSY {
			return nil, &os.PathError{Op: "CreateFile", Path: name, Err: err}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("ipc: dialing %s: %w (%v)", name, ErrTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
