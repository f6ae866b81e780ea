package winapi

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// Confined describes a sandboxed child for SpawnConfined.
type Confined struct {
	// SIDs are the synthetic restricting SIDs (see RestrictedToken).
	SIDs []string
	// Integrity, when non-zero, lowers the token to that level
	// (acl.LowIL for the unelevated sandbox).
	Integrity uint32
	// App, CmdLine, Env, Dir and the stdio handles are as in Spec.
	App, CmdLine          string
	Env                   []uint16
	Dir                   string
	Stdin, Stdout, Stderr windows.Handle
}

// Sandboxed is a child SpawnConfined started, with the job and private
// desktop it runs in.
type Sandboxed struct {
	*Process
	Job     *Job
	Desktop *Desktop
}

// Close kills whatever still runs in the job and releases the job, the
// desktop and the process handle.
func (s *Sandboxed) Close() {
	s.Job.Close()
	s.Desktop.Close()
	s.Process.Close()
}

// ConfineError says which step of SpawnConfined failed: "token" (the
// restricted token or its logon SID), "desktop", "job" or "spawn".
type ConfineError struct {
	Stage string
	Err   error
}

func (e *ConfineError) Error() string {
	if e.Stage == "spawn" {
		return e.Err.Error()
	}
	return e.Stage + ": " + e.Err.Error()
}

func (e *ConfineError) Unwrap() error { return e.Err }

// SpawnConfined is the one sequence both Windows modes start a sandboxed
// command with, in this process's security context (the user's in
// unelevated mode, the sandbox user's in agentbox-runner): the
// write-restricted token from this process's own, lowered to c.Integrity;
// a private desktop granted to this process's logon SID (a restricting
// SID of that token, so the child passes both access checks); a
// kill-on-close job; then Spawn, which creates the child suspended,
// assigns it and resumes it.
func SpawnConfined(c Confined) (*Sandboxed, error) {
	fail := func(stage string, err error) (*Sandboxed, error) {
		return nil, &ConfineError{Stage: stage, Err: err}
	}
	self, err := OpenSelfToken()
	if err != nil {
		return fail("token", err)
	}
	defer self.Close()
	tok, err := RestrictedToken(self, c.SIDs...)
	if err != nil {
		return fail("token", err)
	}
	defer tok.Close()
	if c.Integrity != 0 {
		if err := SetIntegrity(tok, c.Integrity); err != nil && !IsWine() {
			return fail("token", err) // Wine only may lack it; it enforces nothing either
		}
	}
	logon, err := LogonSID(self)
	if err != nil {
		return fail("token", fmt.Errorf("private desktop: %w", err))
	}
	desk, err := NewDesktop(logon)
	if err != nil {
		return fail("desktop", err)
	}
	job, err := NewJob()
	if err != nil {
		desk.Close()
		return fail("job", err)
	}
	p, err := Spawn(Spec{
		Token: tok, App: c.App, CmdLine: c.CmdLine, Env: c.Env, Dir: c.Dir,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, Job: job, Desktop: desk.Name,
	})
	if err != nil {
		job.Close()
		desk.Close()
		return fail("spawn", err)
	}
	return &Sandboxed{Process: p, Job: job, Desktop: desk}, nil
}
