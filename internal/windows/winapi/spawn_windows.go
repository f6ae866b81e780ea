package winapi

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Spec describes a process to start with Spawn.
type Spec struct {
	// Token is the primary token to run under; 0 runs under the caller's,
	// unconfined (danger-full-access): then the console may be shared and
	// Desktop may be empty (winsta0\default).
	Token windows.Token
	// App is the executable (lpApplicationName) and CmdLine the full
	// command line; see winenv.Build.
	App, CmdLine string
	// Env is a CREATE_UNICODE_ENVIRONMENT block (winenv.Block); nil
	// inherits the caller's environment.
	Env []uint16
	// Dir is the working directory; "" is the caller's.
	Dir string
	// Stdin, Stdout and Stderr are handles in the caller; Spawn passes
	// inheritable duplicates, and only those, to the child. None may be a
	// console handle (see IsConsole): callers relay a console through
	// pipes.
	Stdin, Stdout, Stderr windows.Handle
	// Job receives the process before its first instruction runs.
	Job *Job
	// Desktop is lpDesktop, "winsta\desktop": the run's private desktop
	// (NewDesktop). It is required: the user's winsta0\default would let
	// the child send input to the user's windows. (Some programs, such as
	// PowerShell, fail to initialise under a restricted token when
	// lpDesktop is left empty.)
	Desktop string
}

// Process is a started child.
type Process struct {
	Handle windows.Handle
	Pid    uint32
}

// CreationFlags are Spawn's process creation flags. CREATE_NO_WINDOW
// keeps the child off the caller's console: a console program gets a
// hidden console of its own, so even a child that opens CONIN$ or
// CONOUT$ by name reaches only that one, never the user's shell.
const CreationFlags = windows.CREATE_SUSPENDED | windows.EXTENDED_STARTUPINFO_PRESENT |
	windows.CREATE_UNICODE_ENVIRONMENT | windows.CREATE_NO_WINDOW

// ErrConsoleHandle is Spawn's refusal of a console stdio handle.
var ErrConsoleHandle = errors.New("spawn: a stdio handle is a console; relay it through a pipe")

// Spawn starts the process suspended, assigns it to the job, then resumes
// it: there is no moment at which the child (or anything it starts) runs
// outside the job. Only the three stdio handles are inherited
// (PROC_THREAD_ATTRIBUTE_HANDLE_LIST); none may be a console. The child
// gets its own hidden console (CreationFlags) and runs on s.Desktop.
func Spawn(s Spec) (*Process, error) {
	if s.Job == nil {
		return nil, errors.New("spawn: no job object")
	}
	flags := uint32(CreationFlags)
	if s.Token != 0 {
		if s.Desktop == "" {
			return nil, errors.New("spawn: no private desktop")
		}
		for _, h := range []windows.Handle{s.Stdin, s.Stdout, s.Stderr} {
			if h != 0 && h != windows.InvalidHandle && IsConsole(h) {
				return nil, ErrConsoleHandle
			}
		}
	} else {
		// No sandbox (danger-full-access): the caller's own rights, its
		// console and desktop.
		flags &^= windows.CREATE_NO_WINDOW
	}
	cur := windows.CurrentProcess()
	var inherit []windows.Handle
	dup := func(h windows.Handle) (windows.Handle, error) {
		if h == 0 || h == windows.InvalidHandle {
			return 0, errors.New("spawn: missing stdio handle")
		}
		var d windows.Handle
		if err := windows.DuplicateHandle(cur, h, cur, &d, 0, true, windows.DUPLICATE_SAME_ACCESS); err != nil {
			return 0, os.NewSyscallError("DuplicateHandle", err)
		}
		inherit = append(inherit, d)
		return d, nil
	}
	defer func() {
		for _, h := range inherit {
			windows.CloseHandle(h)
		}
	}()
	var std [3]windows.Handle
	for i, h := range []windows.Handle{s.Stdin, s.Stdout, s.Stderr} {
		d, err := dup(h)
		if err != nil {
			return nil, err
		}
		std[i] = d
	}

	attrs, err := windows.NewProcThreadAttributeList(1)
	if err != nil {
		return nil, os.NewSyscallError("InitializeProcThreadAttributeList", err)
	}
	defer attrs.Delete()
	if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&inherit[0]),
		uintptr(len(inherit))*unsafe.Sizeof(inherit[0])); err != nil {
		return nil, os.NewSyscallError("UpdateProcThreadAttribute", err)
	}

	dn := s.Desktop
	if dn == "" {
		dn = `winsta0\default`
	}
	desktop, err := windows.UTF16PtrFromString(dn)
	if err != nil {
		return nil, fmt.Errorf("spawn: desktop %q: %w", s.Desktop, err)
	}
	si := windows.StartupInfoEx{
		StartupInfo: windows.StartupInfo{
			Cb:        uint32(unsafe.Sizeof(windows.StartupInfoEx{})),
			Flags:     windows.STARTF_USESTDHANDLES,
			StdInput:  std[0],
			StdOutput: std[1],
			StdErr:    std[2],
			Desktop:   desktop,
		},
		ProcThreadAttributeList: attrs.List(),
	}
	app, err := windows.UTF16PtrFromString(s.App)
	if err != nil {
		return nil, fmt.Errorf("spawn: program %q: %w", s.App, err)
	}
	cmd, err := windows.UTF16FromString(s.CmdLine) // writable copy: CreateProcessW may modify it
	if err != nil {
		return nil, fmt.Errorf("spawn: command line: %w", err)
	}
	var dir *uint16
	if s.Dir != "" {
		if dir, err = windows.UTF16PtrFromString(s.Dir); err != nil {
			return nil, fmt.Errorf("spawn: dir %q: %w", s.Dir, err)
		}
	}
	var env *uint16
	if s.Env != nil {
		env = &s.Env[0]
	}
	var pi windows.ProcessInformation
	if s.Token != 0 {
		err = windows.CreateProcessAsUser(s.Token, app, &cmd[0], nil, nil, true, flags, env, dir, &si.StartupInfo, &pi)
		err = os.NewSyscallError("CreateProcessAsUser", err)
	} else {
		err = windows.CreateProcess(app, &cmd[0], nil, nil, true, flags, env, dir, &si.StartupInfo, &pi)
		err = os.NewSyscallError("CreateProcess", err)
	}
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(pi.Thread)
	if err := s.Job.Assign(pi.Process); err != nil {
		windows.TerminateProcess(pi.Process, 1)
		windows.CloseHandle(pi.Process)
		return nil, err
	}
	if _, err := windows.ResumeThread(pi.Thread); err != nil {
		windows.TerminateProcess(pi.Process, 1)
		windows.CloseHandle(pi.Process)
		return nil, os.NewSyscallError("ResumeThread", err)
	}
	return &Process{Handle: pi.Process, Pid: pi.ProcessId}, nil
}

// Wait blocks until the process exits and returns its exit code.
func (p *Process) Wait() (uint32, error) {
	if _, err := windows.WaitForSingleObject(p.Handle, windows.INFINITE); err != nil {
		return 0, os.NewSyscallError("WaitForSingleObject", err)
	}
	var code uint32
	if err := windows.GetExitCodeProcess(p.Handle, &code); err != nil {
		return 0, os.NewSyscallError("GetExitCodeProcess", err)
	}
	return code, nil
}

// Close releases the process handle.
func (p *Process) Close() error { return windows.CloseHandle(p.Handle) }
