//go:build !windows

package main

import (
	"bytes"
	"debug/pe"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestManifestRequiresAdministrator builds agentbox-setup.exe for both
// Windows architectures and checks that the embedded manifest (from the
// committed .syso files) asks for elevation, and that the manifest is in
// the PE resource section where Windows reads it.
func TestManifestRequiresAdministrator(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the Windows binary: %v", err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		exe := filepath.Join(t.TempDir(), "agentbox-setup.exe")
		cmd := exec.Command(gobin, "build", "-o", exe, ".")
		cmd.Env = append(cmd.Environ(), "GOOS=windows", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: go build: %v\n%s", arch, err, out)
		}
		f, err := pe.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		rsrc := f.Section(".rsrc")
		if rsrc == nil {
			f.Close()
			t.Fatalf("%s: no .rsrc section: the .syso was not linked", arch)
		}
		data, err := rsrc.Data()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`level="requireAdministrator"`, `uiAccess="false"`} {
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("%s: manifest lacks %s", arch, want)
			}
		}
		if bytes.Contains(data, []byte(`level="asInvoker"`)) {
			t.Errorf("%s: manifest also says asInvoker", arch)
		}
	}
}
