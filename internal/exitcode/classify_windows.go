package exitcode

import "syscall"

// errorBadExeFormat is ERROR_BAD_EXE_FORMAT (193), which the syscall
// package does not name: CreateProcess found a file that is not a
// program (ERROR_ACCESS_DENIED is fs.ErrPermission).
const errorBadExeFormat = syscall.Errno(193)

// notFound: fs.ErrNotExist covers ERROR_FILE_NOT_FOUND and
// ERROR_PATH_NOT_FOUND; nothing more is "not found".
func notFound(err error) bool { return false }

func notExecutable(err error) bool {
	e, ok := errnoOf[syscall.Errno](err)
	return ok && e == errorBadExeFormat
}
