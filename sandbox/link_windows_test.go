package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// A protected name that is a link (here a junction, which needs no
// privilege) cannot be deleted or renamed and replaced: the deny is on the
// link object itself, not only on its target.
func TestEnforceProtectedLink(t *testing.T) {
	requireEnforcement(t)
	pol, base := testPolicy(t, policy.WorkspaceWrite)
	target := filepath.Join(base, "outside", "agents-target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(pol.Cwd(), ".agents")
	if out, err := exec.Command("cmd", "/c", "mklink", "/J", link, target).CombinedOutput(); err != nil {
		t.Skipf("mklink /J: %v: %s", err, out)
	}
	pol, err := policytest.Resolve(policy.Options{Mode: policy.WorkspaceWrite, Cwd: pol.Cwd()},
		func(k string) string {
			if k == "TEMP" || k == "TMP" {
				return ""
			}
			return os.Getenv(k)
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		helper string
		args   []string
	}{
		{"delete the link", "delete", []string{link}},
		{"rename the link aside", "rename", []string{link, filepath.Join(pol.Cwd(), "agents-aside")}},
		{"write through the link", "write", []string{filepath.Join(link, "x.txt")}},
	} {
		if sandboxed(t, pol, c.helper, c.args...) {
			t.Errorf("%s: succeeded", c.name)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeIrregular == 0 && fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the junction is gone or replaced: %v %v", fi, err)
	}
	os.Remove(link) // before the tree cleanup, which must not follow it
}
