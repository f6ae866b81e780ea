package exitcode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// TestClassify is the table every start path uses: 127 for a command
// that is not there, 126 for one the kernel would not run, 125 for a
// failure that is agentbox's, through any wrapping.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{syscall.ENOENT, NotFound},
		{fs.ErrNotExist, NotFound},
		{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOENT}, NotFound},
		{fmt.Errorf("starting x: %w", syscall.EACCES), NotExecutable},
		{syscall.EPERM, NotExecutable},
		{fs.ErrPermission, NotExecutable},
		{errors.New("proxy would not start"), SandboxFailure},
		{fmt.Errorf("spawn: %w", errors.New("x")), SandboxFailure},
	}
	if runtime.GOOS != "windows" {
		cases = append(cases, []struct {
			err  error
			want int
		}{
			{syscall.ENOTDIR, NotFound},
			{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOEXEC}, NotExecutable},
			{&os.PathError{Op: "fork/exec", Path: "/x", Err: syscall.E2BIG}, NotExecutable},
			{syscall.EISDIR, NotExecutable},
			{syscall.ETXTBSY, NotExecutable},
			{syscall.ELOOP, NotExecutable},
			{syscall.ENAMETOOLONG, NotExecutable},
			{syscall.ENOMEM, SandboxFailure},
			{syscall.EAGAIN, SandboxFailure},
			{syscall.EMFILE, SandboxFailure},
		}...)
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// TestClassifyExec: what os/exec itself returns for the bad execs the
// e2e test makes (test/linux TestExecErrorsAgree) lands where the table
// says, so an unsandboxed start agrees with the sandboxed ones.
func TestClassifyExec(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the files are POSIX executables")
	}
	dir := t.TempDir()
	garbage := dir + "/garbage"
	os.WriteFile(garbage, []byte("\x00\x01 not a program"), 0o755)
	plain := dir + "/plain"
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	for path, want := range map[string]int{
		dir + "/absent": NotFound, garbage: NotExecutable, plain: NotExecutable, dir: NotExecutable,
		plain + "/below": NotFound,
	} {
		err := exec.Command(path).Run()
		if got := Classify(err); got != want {
			t.Errorf("%s: %v: Classify = %d, want %d", path, err, got, want)
		}
	}
}
