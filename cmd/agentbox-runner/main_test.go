//go:build !windows

package main

import (
	"bytes"
	"debug/pe"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNoElevationManifest checks the runner never asks for elevation: it
// runs as an unprivileged sandbox user and a requireAdministrator
// manifest would make CreateProcessWithLogonW fail (ERROR_ELEVATION_REQUIRED).
func TestNoElevationManifest(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the Windows binary: %v", err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		exe := filepath.Join(t.TempDir(), "agentbox-runner.exe")
		cmd := exec.Command(gobin, "build", "-o", exe, ".")
		cmd.Env = append(cmd.Environ(), "GOOS=windows", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: go build: %v\n%s", arch, err, out)
		}
		f, err := pe.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		if s := f.Section(".rsrc"); s != nil {
			data, _ := s.Data()
			if bytes.Contains(data, []byte("requireAdministrator")) || bytes.Contains(data, []byte("highestAvailable")) {
				t.Errorf("%s: runner carries an elevation manifest", arch)
			}
		}
		f.Close()
	}
}
