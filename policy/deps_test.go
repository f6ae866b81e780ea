package policy

import (
	"go/build"
	"os/exec"
	"strings"
	"testing"
)

// TestNoSyscallImports keeps the policy core pure: no platform packages.
func TestNoSyscallImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range append(pkg.Imports, pkg.TestImports...) {
		if strings.HasPrefix(imp, "golang.org/x/sys/") || imp == "syscall" || imp == "unsafe" {
			t.Errorf("policy imports %s; platform code belongs in the backends", imp)
		}
	}
}

// TestNoSystemCallPackages keeps policy a value-and-resolution package:
// it must not link golang.org/x/sys (directly or through another package),
// on any OS, so that it stays buildable and testable everywhere and its
// importers do not inherit a platform layer through it.
func TestNoSystemCallPackages(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list policy's dependencies: %v", err)
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		cmd := exec.Command(gobin, "list", "-deps", "github.com/agentbox/agentbox/policy")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: go list: %v", goos, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("%s: go list printed %d packages; the test cannot judge", goos, len(deps))
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "golang.org/x/sys/") {
				t.Errorf("%s: policy links %s", goos, d)
			}
		}
	}
}
