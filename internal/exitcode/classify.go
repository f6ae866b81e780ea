package exitcode

import (
	"errors"
	"io/fs"
)

// Classify is the one table from a failure to start a command to the
// status agentbox exits with for it; every place an exec can fail (the
// lone run's init, the zygote, a session command's init, the
// unsandboxed start, the Windows launchers and the PATH lookup) uses it,
// so that the same bad command gets the same status on every path.
//
// It follows POSIX and bash (execute_cmd.c, shell_execve): a command
// that is not there (ENOENT, ENOTDIR: a path component is a file) is
// 127; a command that is there but the kernel refused to execute
// (EACCES, EPERM, ENOEXEC, EISDIR, E2BIG, ETXTBSY, ELOOP, ENAMETOOLONG,
// and the loader's errors) is 126, as bash says "Argument list too long"
// and exits 126. Anything else (a fork that failed for want of memory or
// processes, an error that is not the exec's) is agentbox failing to
// start it, 125: the command was never looked at. nil is 0.
func Classify(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, fs.ErrNotExist) || notFound(err):
		return NotFound
	case errors.Is(err, fs.ErrPermission) || notExecutable(err):
		return NotExecutable
	}
	return SandboxFailure
}

// errnoOf is the system error in err's chain, if any.
func errnoOf[E error](err error) (E, bool) {
	var e E
	return e, errors.As(err, &e)
}
