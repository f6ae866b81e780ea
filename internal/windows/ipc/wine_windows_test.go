package ipc

import (
	"testing"

	"golang.org/x/sys/windows"
)

// TestWindowsProcess is the smallest check that the test binary really runs
// as a Windows process (natively or under Wine).
func TestWindowsProcess(t *testing.T) {
	if windows.GetCurrentProcessId() == 0 {
		t.Fatal("GetCurrentProcessId returned 0")
	}
}
