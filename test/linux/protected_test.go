//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// agentNames are the protected names of the default list that agents and
// editors on the host run things from (issue 21, finding 5), with the
// default list's older names.
var agentNames = []string{".git", ".codex", ".agents", ".claude", ".mcp.json", ".vscode", ".idea", ".cursor", ".gemini", ".zed"}

// readOnlyDir makes dir/name with file.txt in it, owned by someone other
// than u (root for a plain user, a plain user for root), mode 0755: u
// can read it and, unless it is root, not write it.
func readOnlyDir(t *testing.T, u *testUser, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(baseDir, "abtest-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, name)
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "file.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	owner := 0
	if u.root() {
		owner = 65534 // nobody
		for _, o := range users {
			if !o.root() {
				owner = o.uid
			}
		}
	}
	for _, p := range []string{ws, filepath.Join(ws, "file.txt")} {
		if err := os.Lchown(p, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// TestUnwritableWorkspace (issue 22, finding 5): in a directory the caller
// cannot write and does not own, no protected name can be created by the
// command either (it runs as the caller, without capabilities), so no
// placeholder is needed: `cat file.txt` works, through a lone run and the
// resident helper, and doctor there reports a working sandbox. The
// command still cannot create any protected name (DAC refuses it), and
// nothing is left in the directory. Root can write anywhere: its runs
// make placeholders there as anywhere, and remove them.
func TestUnwritableWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		ws := readOnlyDir(t, u, "ro")
		before := snapshot(t, filepath.Dir(ws))
		script := `cat file.txt; for n in ` + strings.Join(agentNames, " ") + `; do mkdir "$n" 2>/dev/null && echo "MADE $n"; (: > "$n") 2>/dev/null && echo "MADE $n"; done; exit 0`
		for _, resident := range []string{"0", "1"} {
			var r result
			for i := 0; i < 3; i++ { // the helper serves from the second or third run on
				r = runWith(t, u, runOpts{dir: ws, env: []string{"AGENTBOX_RESIDENT=" + resident}}, "run", "--", "/bin/sh", "-c", script)
			}
			if r.code != 0 || r.stdout != "hello\n" {
				t.Errorf("AGENTBOX_RESIDENT=%s: run -- cat file.txt in a directory %s cannot write: %v", resident, u.name, r)
			}
		}
		for _, d := range diffSnapshots(before, snapshot(t, filepath.Dir(ws)), nil) {
			t.Errorf("host after the runs: %s", d)
		}
		r := runWith(t, u, runOpts{dir: ws}, "doctor")
		if r.code != 0 || strings.Contains(r.stdout, "no sandbox is possible") || strings.Contains(r.stdout, "FAIL] sandbox probe") {
			t.Errorf("doctor in %s: %v", ws, r)
		}
	})
}

// TestOwnedReadOnlyWorkspace: a directory the caller owns but cannot
// write is one the command could make writable (chmod) and then create
// a protected name in. A plain user's run there fails closed, naming the
// directory and the fix, and so does doctor's probe, without blaming the
// machine; root can create the placeholders, so its run works.
func TestOwnedReadOnlyWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		before := snapshot(t, fx.dir)
		if err := os.Chmod(fx.ws, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(fx.ws, 0o755) })
		r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"AGENTBOX_RESIDENT=0"}}, "run", "--", "/bin/sh", "-c", `chmod u+w . && mkdir .claude && echo '{"hooks":{}}' > .claude/settings.json; cat file.txt`)
		if u.root() {
			if r.code != 0 || !strings.HasSuffix(r.stdout, "orig\n") {
				t.Errorf("root's run: %v", r)
			}
		} else {
			if r.code != 125 || !strings.Contains(r.stderr, fx.ws) || !strings.Contains(r.stderr, "chmod") {
				t.Errorf("a plain user's run in its own read-only directory: %v, want 125 naming %s and the fix", r, fx.ws)
			}
			d := runWith(t, u, runOpts{dir: fx.ws}, "doctor")
			if strings.Contains(d.stdout, "no sandbox is possible") || !strings.Contains(d.stdout, fx.ws) {
				t.Errorf("doctor in %s: %v", fx.ws, d)
			}
		}
		if err := os.Chmod(fx.ws, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), nil) {
			t.Errorf("host after the run: %s", d)
		}
	})
}
