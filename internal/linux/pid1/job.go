// Package pid1 is PID 1 of a session command's pid namespace, when the
// session asks for one (agentbox's resident helper does): a small init
// that the session's zygote starts before the command is asked for, that
// then runs the command as its child, forwards signals to it, reaps
// orphans and exits with the command's status. It takes over from its
// package init function in a process started with argv[0] [Arg0].
//
// The job (what to run) travels from the zygote to the waiting init over
// a stream socket at fd [JobFD]: the command's stdin, stdout and stderr as
// SCM_RIGHTS with the first bytes, then the encoding of [Job], then EOF
// (the zygote shuts its side for writing). Back on the same socket, once
// the command and everything it left are gone, comes one byte: the
// command's status (128+N when signal N killed it), the init's exit
// status too.
package pid1

// Only packages that initialise before the heavy ones of the binary it
// is part of (see run), so that it takes over early: not fmt, bytes or
// strings, whose dependencies initialise late.
import (
	"errors"
	"strconv"
)

// Arg0 is argv[0] of the init; only a session's zygote starts a process
// with it.
const Arg0 = "agentbox-resident-init"

// JobFD is the init's end of the socket its job arrives on.
const JobFD = 3

// MaxJob bounds an encoded job (argv and the environment together; the
// kernel's own limit for execve is near this).
const MaxJob = 4 << 20

// Job is the command the init runs: Path (already looked up) with Argv
// and Env, in Dir.
type Job struct {
	Path, Dir string
	Argv, Env []string
}

// Encode is the job's encoding: NUL-terminated strings (path, dir, the
// number of arguments, the arguments, then the environment to the end).
// exec's strings cannot hold a NUL, so neither may the job's.
func (j *Job) Encode() ([]byte, error) {
	if len(j.Argv) == 0 {
		return nil, errors.New("no command")
	}
	fields := append([]string{j.Path, j.Dir, strconv.Itoa(len(j.Argv))}, j.Argv...)
	fields = append(fields, j.Env...)
	n := 0
	for _, f := range fields {
		n += len(f) + 1
	}
	if n > MaxJob {
		return nil, errors.New("the command's arguments and environment take " + strconv.Itoa(n) + " bytes, over " + strconv.Itoa(MaxJob))
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		for i := 0; i < len(f); i++ {
			if f[i] == 0 {
				return nil, errors.New(strconv.Quote(f) + " holds a NUL byte")
			}
		}
		b = append(append(b, f...), 0)
	}
	return b, nil
}

// decodeJob is the inverse of Encode.
func decodeJob(b []byte) (*Job, error) {
	if len(b) == 0 || b[len(b)-1] != 0 {
		return nil, errors.New("truncated job")
	}
	var f []string
	for start, i := 0, 0; i < len(b); i++ {
		if b[i] == 0 {
			f = append(f, string(b[start:i]))
			start = i + 1
		}
	}
	if len(f) < 3 {
		return nil, errors.New("truncated job")
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 1 || n > len(f)-3 {
		return nil, errors.New("bad argument count " + strconv.Quote(f[2]))
	}
	return &Job{Path: f[0], Dir: f[1], Argv: f[3 : 3+n], Env: append([]string{}, f[3+n:]...)}, nil
}
