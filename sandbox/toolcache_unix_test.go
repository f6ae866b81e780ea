//go:build unix

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

// The run names a private directory of programs the command installed
// into, and only then; a symlink the command put on the way is not
// followed. A PATH through the private directory is refused.
func TestProgramsNote(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	layers := filepath.Join(dir, "state", "toolcache", "k")
	pol := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: ws, WritableRoots: []string{ws}, ToolCacheMode: policy.CachesOverlay,
		ToolCaches: []policy.ToolCache{
			{Name: "go-bin", Desc: "programs from go install", Env: "GOBIN", Programs: true, Host: "/h/go/bin", Layer: filepath.Join(layers, "go-bin")},
			{Name: "cargo-install", Desc: "programs from cargo install", Env: "CARGO_INSTALL_ROOT", Programs: true, Bin: "bin", Host: "/h/.cargo/bin", Layer: filepath.Join(layers, "cargo-install")},
		}})
	gobin := filepath.Join(layers, "private", "go-bin")
	cargo := filepath.Join(layers, "private", "cargo-install")
	if got := toolcache.ProgramsDir(pol.ToolCaches()[1]); got != filepath.Join(cargo, "bin") {
		t.Fatalf("ProgramsDir = %q", got)
	}
	w := watchPrograms(pol)
	if n := w.notes(); len(n) != 0 {
		t.Errorf("nothing installed, yet %q", n)
	}
	os.MkdirAll(gobin, 0o755)
	os.MkdirAll(filepath.Join(dir, "elsewhere", "bin"), 0o755)
	os.MkdirAll(filepath.Dir(cargo), 0o755)
	os.Symlink(filepath.Join(dir, "elsewhere"), cargo)
	n := w.notes()
	if len(n) != 1 || !strings.HasPrefix(n[0], "programs from go install are in "+gobin+" (GOBIN, private to this workspace), not in /h/go/bin") {
		t.Errorf("notes %q, want one for go-bin only", n)
	}
	w = watchPrograms(pol)
	if n := w.notes(); len(n) != 0 {
		t.Errorf("nothing changed, yet %q", n)
	}
	if err := checkPrivatePath(pol, []string{"PATH=/usr/bin:" + gobin}); err == nil || !strings.Contains(err.Error(), gobin) {
		t.Errorf("PATH through the private GOBIN: %v", err)
	}
	if err := checkPrivatePath(pol, []string{"PATH=/usr/bin"}); err != nil {
		t.Errorf("plain PATH: %v", err)
	}
}
