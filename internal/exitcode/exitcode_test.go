package exitcode

import (
	"errors"
	"io/fs"
	"testing"
)

func TestErrorWraps(t *testing.T) {
	var err error = &Error{Code: NotFound, Err: fs.ErrNotExist}
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != fs.ErrNotExist.Error() {
		t.Fatalf("%v: want the wrapped error's text and chain", err)
	}
	if SandboxFailure != 125 || NotExecutable != 126 || NotFound != 127 {
		t.Fatal("the CLI contract's statuses changed")
	}
}
