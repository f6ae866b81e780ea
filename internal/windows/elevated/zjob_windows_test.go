package elevated

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

var procIsProcessInJob = windows.NewLazySystemDLL("kernel32.dll").NewProc("IsProcessInJob")

// isProcessInJob is a test-only binding (winapi keeps its own unexported).
func isProcessInJob(p, job windows.Handle, in *int32) error {
	r, _, err := procIsProcessInJob.Call(uintptr(p), uintptr(job), uintptr(unsafePointer(in)))
	if r == 0 {
		return err
	}
	return nil
}

func unsafePointer(p *int32) unsafe.Pointer { return unsafe.Pointer(p) }
