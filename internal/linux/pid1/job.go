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
// strings, whose dependencies initialise late. Package wire is as light.
import (
	"errors"
	"strconv"

	"github.com/agentbox/agentbox/internal/wire"
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

// tagJob is the tag of a job's encoding (package wire).
const tagJob = 'J'

// Encode is the job's encoding (package wire): path, dir, the arguments,
// the environment. exec's strings cannot hold a NUL, so neither may the
// job's.
func (j *Job) Encode() ([]byte, error) {
	if len(j.Argv) == 0 {
		return nil, errors.New("no command")
	}
	n := 1 + 4*8
	for _, list := range [][]string{{j.Path, j.Dir}, j.Argv, j.Env} {
		for _, f := range list {
			if err := noNUL(f); err != nil {
				return nil, err
			}
			n += 8 + len(f)
		}
	}
	if n > MaxJob {
		return nil, errors.New("the command's arguments and environment take " + strconv.Itoa(n) + " bytes, over " + strconv.Itoa(MaxJob))
	}
	b := wire.AppendTag(make([]byte, 0, n), tagJob)
	b = wire.AppendString(wire.AppendString(b, j.Path), j.Dir)
	return wire.AppendStrings(wire.AppendStrings(b, j.Argv), j.Env), nil
}

func noNUL(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return errors.New(strconv.Quote(s) + " holds a NUL byte")
		}
	}
	return nil
}

// decodeJob is the inverse of Encode; it refuses what Encode would.
func decodeJob(b []byte) (*Job, error) {
	d := wire.NewDecoder(b)
	d.Tag(tagJob)
	j := &Job{Path: d.ReadString(), Dir: d.ReadString(), Argv: d.ReadStrings(), Env: d.ReadStrings()}
	if err := d.End(); err != nil {
		return nil, errors.New("job: " + err.Error())
	}
	if len(j.Argv) == 0 {
		return nil, errors.New("job: no command")
	}
	for _, list := range [][]string{{j.Path, j.Dir}, j.Argv, j.Env} {
		for _, f := range list {
			if err := noNUL(f); err != nil {
				return nil, errors.New("job: " + err.Error())
			}
		}
	}
	return j, nil
}
