package apparmor

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileParses runs the installed apparmor_parser over the profile
// without loading it. Only AppArmor 4 parsers know `abi <abi/4.0>` and
// `userns`; an older one checks everything else (the structure and the
// quoted attachment) on a copy with those two lines changed, and the test
// says what it could not check.
func TestProfileParses(t *testing.T) {
	parser, err := findParser()
	if err != nil {
		t.Skip("no apparmor_parser installed: the profile's syntax is checked only by the golden file here")
	}
	if _, err := os.Stat("/etc/apparmor.d/tunables/global"); err != nil {
		t.Skipf("%s has no /etc/apparmor.d/tunables/global to include", parser)
	}
	_, err = os.Stat("/etc/apparmor.d/abi/4.0")
	v4 := err == nil
	for _, exe := range []string{"/usr/local/bin/agentbox", "/opt/my tools/a,b@c#d/agentbox"} {
		p, err := Profile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if !v4 {
			p = strings.Replace(p, "abi <abi/4.0>,", "abi <abi/3.0>,", 1)
			p = strings.Replace(p, "  userns,\n", "", 1)
		}
		f := filepath.Join(t.TempDir(), "agentbox")
		if err := os.WriteFile(f, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		// -Q: compile only, never load; -K: no cache.
		out, err := exec.Command(parser, "-Q", "-K", f).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Errorf("%s -Q -K rejects the profile for %q: %v\n%s\n%s", parser, exe, err, out, p)
		}
	}
	if !v4 {
		t.Logf("%s predates AppArmor 4 (no abi/4.0): checked the profile with `abi <abi/3.0>` and without `userns,`; those two lines are checked by the golden file only", parser)
	}
}
