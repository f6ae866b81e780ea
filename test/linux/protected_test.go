//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		// Doctor there: a working sandbox, and the protected list.
		r := runWith(t, u, runOpts{dir: ws}, "doctor")
		if r.code != 0 || strings.Contains(r.stdout, "no sandbox is possible") || strings.Contains(r.stdout, "FAIL] sandbox probe") ||
			!strings.Contains(r.stdout, strings.Join(agentNames, ", ")) {
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

// agentFilesAttack tries, in the workspace and the --add-dir root, every
// way to plant what agents and editors run from: writing, renaming a
// directory or file of its own into place, renaming the protected one
// aside (and putting a symlink there), hard and symbolic links, removing
// it, .mcp.json as a directory; and renaming the roots themselves. It
// prints a line for each that worked, and writes ok.txt in each root (the
// rest stays writable).
const agentFilesAttack = `
for R in "$WS" "$ADD"; do
  S="$R/scratch"; mkdir -p "$S" || exit 1
  for f in .claude/settings.json .vscode/tasks.json .vscode/settings.json .idea/x .cursor/x .gemini/x .zed/x .codex/config.toml .agents/x; do
    d=${f%%/*}
    mkdir -p "$R/$d" 2>/dev/null
    (echo pwn > "$R/$f") 2>/dev/null && echo "WROTE $R/$f"
    mkdir -p "$S/$d" && echo pwn > "$S/$d/${f#*/}" && mv "$S/$d" "$R/$d" 2>/dev/null && echo "RENAMED-INTO $R/$d"
    mv "$R/$d" "$S/aside" 2>/dev/null && echo "RENAMED-ASIDE $R/$d"
    ln -s "$S" "$R/$d" 2>/dev/null && echo "SYMLINKED $R/$d"
    rm -rf "$R/$d" 2>/dev/null; [ -e "$R/$d" ] || echo "REMOVED $R/$d"
  done
  (echo pwn > "$R/.mcp.json") 2>/dev/null && echo "WROTE $R/.mcp.json"
  echo pwn > "$S/m"
  ln "$S/m" "$R/.mcp.json" 2>/dev/null && echo "LINKED $R/.mcp.json"
  ln -sf "$S/m" "$R/.mcp.json" 2>/dev/null && echo "SYMLINKED $R/.mcp.json"
  mv -f "$S/m" "$R/.mcp.json" 2>/dev/null && echo "RENAMED-INTO $R/.mcp.json"
  rm -f "$R/.mcp.json" 2>/dev/null; [ -e "$R/.mcp.json" ] || echo "REMOVED $R/.mcp.json"
  mkdir "$R/.mcp.json" 2>/dev/null && echo "MKDIR $R/.mcp.json"
  mv "$R" "$R.moved" 2>/dev/null && echo "RENAMED-ROOT $R"
  rm -rf "$S"
  echo ok > "$R/ok.txt" || echo "NOT WRITABLE $R"
done
echo end`

// agentFilesFixture is a fixture whose workspace has .claude/settings.json,
// .vscode/tasks.json and .mcp.json (the --add-dir root has none).
func agentFilesFixture(t *testing.T, u *testUser) *fixture {
	t.Helper()
	fx := newFixture(t, u, noCodex)
	for p, content := range map[string]string{".claude/settings.json": `{"hooks":{}}`, ".vscode/tasks.json": `{"tasks":[]}`, ".mcp.json": `{"mcpServers":{}}`} {
		p = filepath.Join(fx.ws, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, fx.dir, u)
	return fx
}

// agentFilesSnapshot is what the attack must leave as it was: both roots
// and the directory outside them (not agentbox's own state directory,
// which a resident test keeps in the fixture).
func agentFilesSnapshot(t *testing.T, fx *fixture) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, d := range []string{fx.ws, fx.add, fx.out} {
		for p, v := range snapshot(t, d) {
			m[p] = v
		}
	}
	return m
}

// checkAgentFilesAttack checks the attack's output and the host after it.
func checkAgentFilesAttack(t *testing.T, fx *fixture, how, stdout string, before map[string]string) {
	t.Helper()
	if !strings.HasSuffix(stdout, "end\n") {
		t.Errorf("%s: the attack did not run to its end: %q", how, stdout)
	}
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "end\n"), "\n") {
		if line != "" {
			t.Errorf("%s: BREACH: %s", how, line)
		}
	}
	for _, root := range []string{fx.ws, fx.add} {
		assertContent(t, filepath.Join(root, "ok.txt"), "ok\n")
	}
	allow := func(p string) bool {
		return p == filepath.Join(fx.ws, "ok.txt") || p == filepath.Join(fx.add, "ok.txt")
	}
	for _, d := range diffSnapshots(before, agentFilesSnapshot(t, fx), allow) {
		t.Errorf("%s: host: %s", how, d)
	}
	for _, root := range []string{fx.ws, fx.add} {
		os.Remove(filepath.Join(root, "ok.txt"))
	}
}

// TestAgentFilesProtected (issue 21, finding 5): what agents and editors
// run on the host from a workspace (.claude/settings.json, .mcp.json,
// .vscode/tasks.json, .idea, .cursor, .gemini, .zed), existing or not, can
// be neither created, changed, replaced nor moved aside in the workspace
// or an --add-dir root, by a lone run, a run through the resident helper
// or a command of an MCP session; nothing the command tried is on the
// host afterwards (no placeholder either), and the rest stays writable.
func TestAgentFilesProtected(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		t.Run("lone", func(t *testing.T) {
			fx := agentFilesFixture(t, u)
			before := agentFilesSnapshot(t, fx)
			r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "AGENTBOX_RESIDENT=0")},
				"run", "-C", fx.ws, "--add-dir", fx.add, "--", "/bin/sh", "-c", agentFilesAttack)
			checkAgentFilesAttack(t, fx, "lone run", r.stdout, before)
		})
		t.Run("resident", func(t *testing.T) {
			fx := agentFilesFixture(t, u)
			re := newResidentEnv(t, fx)
			extra := []string{"--add-dir", fx.add}
			re.warm(t, extra...)
			before := agentFilesSnapshot(t, fx)
			ok, r := re.served(t, runOpts{}, extra, agentFilesAttack)
			if !ok {
				t.Errorf("not served by the helper: %v", r)
			}
			checkAgentFilesAttack(t, fx, "through the helper", r.stdout, before)
		})
		t.Run("mcp", func(t *testing.T) {
			fx := agentFilesFixture(t, u)
			cs, _, _ := mcpServer(t, u, fx, "--add-dir", fx.add)
			before := agentFilesSnapshot(t, fx)
			for i := range 2 { // and again: the session's next command
				r := mcpSh(t, cs, agentFilesAttack)
				checkAgentFilesAttack(t, fx, fmt.Sprintf("MCP command %d", i), r.Stdout, before)
			}
		})
	})
}

// TestSessionPlaceholdersPerCommand (issue 21, finding 7): a session (an
// MCP server) holds nothing on the host between its commands, yet each
// command finds every protected name held: missing ones made for it and
// gone when it ends, whatever the user did on the host meanwhile (an
// existing .claude removed, a .codex created, both keep being protected),
// and commands running at the same time share them.
func TestSessionPlaceholdersPerCommand(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := agentFilesFixture(t, u)
		cs, _, _ := mcpServer(t, u, fx)
		missing := []string{".codex", ".agents", ".idea", ".cursor", ".gemini", ".zed"}
		gone := func(when string) {
			t.Helper()
			for _, n := range missing {
				if _, err := os.Lstat(filepath.Join(fx.ws, n)); err == nil {
					t.Errorf("%s: %s is on the host between commands", when, n)
				}
			}
		}
		probe := `for n in .claude .codex .idea .zed; do test -d "$n" || echo "NO $n"; mkdir "$n/x" 2>/dev/null && echo "MADE $n/x"; done; echo end`
		if r := mcpSh(t, cs, probe); r.Stdout != "end\n" {
			t.Errorf("first command: %v", r)
		}
		gone("after the first command")

		// The user, between commands: removes .claude, makes .codex.
		if err := os.RemoveAll(filepath.Join(fx.ws, ".claude")); err != nil {
			t.Fatal(err)
		}
		if r := host(t, u, runOpts{dir: fx.ws}, "/bin/mkdir", ".codex"); r.code != 0 {
			t.Fatalf("the user cannot make .codex between commands: %v", r)
		}
		if r := mcpSh(t, cs, probe); r.Stdout != "end\n" {
			t.Errorf("after the host changed: %v", r)
		}
		assertAbsent(t, filepath.Join(fx.ws, ".claude"))
		assertAbsent(t, filepath.Join(fx.ws, ".codex", "x"))
		if err := os.Remove(filepath.Join(fx.ws, ".codex")); err != nil {
			t.Fatalf("the user's .codex: %v", err)
		}

		// Two at once: the second starts while the first holds them, the
		// first ends while the second still runs.
		first := make(chan mcpResult, 1)
		go func() { first <- mcpSh(t, cs, `sleep 1; echo first`) }()
		if !waitFor(5*time.Second, func() bool { return exists(filepath.Join(fx.ws, ".zed")) }) {
			t.Fatal("the first command's placeholders never appeared")
		}
		r := mcpSh(t, cs, `sleep 2; `+probe)
		if f := <-first; f.Stdout != "first\n" {
			t.Errorf("first: %v", f)
		}
		if r.Stdout != "end\n" {
			t.Errorf("a command outliving the one whose placeholders it joined: %v", r)
		}
		gone("after both")
	})
}
