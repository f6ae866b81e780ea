package policy

import (
	"go/build"
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
