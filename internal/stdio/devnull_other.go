//go:build !unix

package stdio

import "os"

func openDevNull(flag int) (*os.File, error) { return os.OpenFile(os.DevNull, flag, 0) }
