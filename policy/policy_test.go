package policy

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func realTemp(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func noEnv(string) string { return "" }

func TestParseMode(t *testing.T) {
	for _, m := range Modes() {
		if got, err := ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMode("workspace"); err == nil || !strings.Contains(err.Error(), `"workspace"`) {
		t.Errorf("bad mode error = %v, want it to name the value", err)
	}
}

func TestConfigStrict(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string // substrings of the error; nil = success
	}{
		{"ok", "sandbox_mode = \"read-only\"\n[sandbox_workspace_write]\nwritable_roots = [\"/x\"]\nnetwork_access = true\nexclude_tmpdir_env_var = true\nexclude_slash_tmp = true\n[windows]\nsandbox = \"elevated\"\n[linux]\nallow_degraded = true\n", nil},
		{"unknown top key", "sandbox = \"x\"\n", []string{"unknown key", "sandbox", "cfg.toml"}},
		{"unknown nested key", "[sandbox_workspace_write]\nwritable_root = []\n", []string{"unknown key", "sandbox_workspace_write.writable_root", "cfg.toml"}},
		{"wrong type", "[sandbox_workspace_write]\nnetwork_access = \"yes\"\n", []string{"cfg.toml", "network_access"}},
		{"bad mode", "sandbox_mode = \"full\"\n", []string{"cfg.toml", "sandbox_mode", `"full"`}},
		{"bad windows sandbox", "[windows]\nsandbox = \"admin\"\n", []string{"cfg.toml", "windows.sandbox", `"admin"`}},
		{"bad protected name", "[sandbox_workspace_write]\nprotected_subpaths = [\"a/b\"]\n", []string{"cfg.toml", "protected_subpaths", `"a/b"`}},
		{"relative unix socket", "[sandbox_workspace_write]\nallow_unix_sockets = [\"docker.sock\"]\n", []string{"cfg.toml", "sandbox_workspace_write.allow_unix_sockets", `"docker.sock"`}},
		{"unix sockets not a list", "[sandbox_workspace_write]\nallow_unix_sockets = \"/run/docker.sock\"\n", []string{"cfg.toml", "allow_unix_sockets"}},
		{"syntax", "sandbox_mode = \n", []string{"cfg.toml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig("cfg.toml", []byte(c.toml))
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if *cfg.SandboxMode != "read-only" || !*cfg.SandboxWorkspaceWrite.NetworkAccess || *cfg.Windows.Sandbox != "elevated" || !*cfg.Linux.AllowDegraded {
					t.Errorf("decoded %+v", cfg)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestResolveDefaultsAndFlags(t *testing.T) {
	ws := realTemp(t)
	extra := realTemp(t)
	tmpdir := realTemp(t)
	env := func(k string) string {
		if k == "TMPDIR" {
			return tmpdir
		}
		return ""
	}
	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{extra}}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode() != WorkspaceWrite || p.Network() || p.Cwd() != ws {
		t.Errorf("defaults: %+v", p)
	}
	for _, want := range []string{ws, extra, tmpdir, "/tmp"} {
		if !slices.Contains(p.WritableRoots(), want) {
			t.Errorf("writable roots %v lack %s", p.WritableRoots(), want)
		}
	}

	yes := true
	cfg := &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: &yes, ExcludeTmpdirEnvVar: &yes}}
	p, err = resolveEnv(Options{Cwd: ws, Config: cfg}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.WritableRoots(), []string{ws}) {
		t.Errorf("with exclusions, roots = %v, want only the workspace", p.WritableRoots())
	}

	p, err = resolveEnv(Options{Cwd: ws, Mode: ReadOnly, Network: &yes}, noEnv, runtime.GOOS)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.WritableRoots()) != 0 || !p.Network() {
		t.Errorf("read-only with --network: %+v", p)
	}

	mode := "read-only"
	p, err = resolveEnv(Options{Cwd: ws, Mode: WorkspaceWrite, Config: &Config{SandboxMode: &mode}}, noEnv, runtime.GOOS)
	if err != nil || p.Mode() != WorkspaceWrite {
		t.Errorf("flag must override config: %v %v", p, err)
	}
	p, err = resolveEnv(Options{Cwd: ws, Mode: DangerFullAccess}, noEnv, runtime.GOOS)
	if err != nil || !p.Network() {
		t.Errorf("danger-full-access implies network: %+v %v", p, err)
	}
}

func TestResolveWindowsTemp(t *testing.T) {
	ws, temp := realTemp(t), realTemp(t)
	env := func(k string) string {
		if k == "TEMP" || k == "TMP" {
			return temp
		}
		return ""
	}
	p, err := resolveEnv(Options{Cwd: ws}, env, "windows")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.WritableRoots(), temp) || slices.Contains(p.WritableRoots(), "/tmp") {
		t.Errorf("windows roots = %v: want %%TEMP%%, not /tmp", p.WritableRoots())
	}
}

func TestResolveErrorsNamePaths(t *testing.T) {
	ws := realTemp(t)
	missing := filepath.Join(ws, "nope")
	file := filepath.Join(ws, "f")
	os.WriteFile(file, nil, 0o644)
	for _, o := range []Options{
		{Cwd: missing},
		{Cwd: ws, AddDirs: []string{missing}},
		{Cwd: ws, AddDirs: []string{file}},
		{Cwd: ws, Mode: "bogus"},
	} {
		_, err := resolveEnv(o, noEnv, runtime.GOOS)
		if err == nil {
			t.Errorf("%+v: want an error", o)
			continue
		}
		if o.Mode == "" && !strings.Contains(err.Error(), ws) {
			t.Errorf("error %q does not name the path", err)
		}
	}
}

// An empty added root would otherwise be the caller's directory.
func TestResolveRefusesEmptyAddedRoot(t *testing.T) {
	ws := realTemp(t)
	_, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{""}}, noEnv, "linux")
	if err == nil || !strings.Contains(err.Error(), "empty path") {
		t.Fatalf("Resolve with an empty added root: err = %v, want an empty-path error", err)
	}
}

// Errors name the option as a library caller spells it, not a CLI flag.
func TestResolveErrorsNameOptions(t *testing.T) {
	ws := realTemp(t)
	missing := filepath.Join(ws, "missing")
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Cwd: ws, AddDirs: []string{""}}, "Options.AddDirs: empty path"},
		{Options{Cwd: ws, AddDirs: []string{missing}}, "Options.AddDirs " + missing + " does not exist"},
		{Options{Cwd: missing}, "workspace (Options.Cwd) " + missing + " does not exist"},
	} {
		_, err := resolveEnv(c.o, noEnv, "linux")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "--") {
			t.Errorf("Resolve(%+v) = %v, want an error naming %q and no flag", c.o, err, c.want)
		}
	}
}

func TestResolveSymlinkedRoot(t *testing.T) {
	base := realTemp(t)
	real := filepath.Join(base, "real")
	mkdirs(t, real)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	p, err := resolveEnv(Options{Cwd: link}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.Cwd() != real || !slices.Contains(p.WritableRoots(), real) {
		t.Errorf("symlinked workspace not resolved: %+v", p)
	}
}

func findProtected(p *Policy, path string) (Protected, bool) {
	for _, pr := range p.Protected() {
		if pr.Path == path {
			return pr, true
		}
	}
	return Protected{}, false
}

func TestProtectedPaths(t *testing.T) {
	base := realTemp(t)
	ws := filepath.Join(base, "ws")
	main := filepath.Join(base, "main")
	gitdir := filepath.Join(main, ".git", "worktrees", "wt")
	mkdirs(t, ws, gitdir, filepath.Join(ws, ".codex"))
	// A linked worktree: relative gitdir, and a commondir back to main/.git.
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: ../main/.git/worktrees/wt\n"), 0o644)
	os.WriteFile(filepath.Join(gitdir, "commondir"), []byte("../..\n"), 0o644)
	os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(ws, ".agents"))

	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{base},
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: new(bool)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ProtectedKind{
		filepath.Join(ws, ".git"):        File,
		filepath.Join(ws, ".codex"):      Dir,
		filepath.Join(ws, ".agents"):     Symlink,
		filepath.Join(base, "elsewhere"): Missing, // dangling link target
		gitdir:                           Dir,
		filepath.Join(main, ".git"):      Dir, // the worktree's common dir
		filepath.Join(base, ".git"):      Missing,
		filepath.Join(base, ".codex"):    Missing,
	}
	for path, kind := range want {
		pr, ok := findProtected(p, path)
		if !ok {
			t.Errorf("%s not protected; have %+v", path, p.Protected())
			continue
		}
		if pr.Kind != kind {
			t.Errorf("%s kind = %v, want %v", path, pr.Kind, kind)
		}
	}
	// The innermost root owns each path, so nesting keeps protection.
	if pr, _ := findProtected(p, filepath.Join(ws, ".git")); pr.Root != ws {
		t.Errorf("root of ws/.git = %q, want %q", pr.Root, ws)
	}
	if pr, _ := findProtected(p, gitdir); pr.Root != base {
		t.Errorf("root of gitdir = %q, want %q", pr.Root, base)
	}
	for _, w := range []string{filepath.Join(ws, "src/a.go"), filepath.Join(base, "x")} {
		if !p.IsWritable(w) {
			t.Errorf("%s should be writable", w)
		}
	}
	for _, r := range []string{filepath.Join(ws, ".git"), filepath.Join(gitdir, "HEAD"), filepath.Join(main, ".git", "config"), filepath.Join(ws, ".codex", "x"), "/etc/passwd"} {
		if p.IsWritable(r) {
			t.Errorf("%s should not be writable", r)
		}
	}
}

func TestProtectedFirstMissingComponent(t *testing.T) {
	ws := realTemp(t)
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+filepath.Join(ws, "a", "b", "c")+"\n"), 0o644)
	p, err := resolveEnv(Options{Cwd: ws, Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := findProtected(p, filepath.Join(ws, "a")); !ok || pr.Kind != Missing {
		t.Errorf("a missing gitdir must pin its first missing component: %+v", p.Protected())
	}
}

func TestProtectedSubpathsConfigurable(t *testing.T) {
	ws := realTemp(t)
	p, err := resolveEnv(Options{Cwd: ws, Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{
		ProtectedSubpaths: []string{".vscode"}, ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := findProtected(p, filepath.Join(ws, ".vscode")); !ok {
		t.Error(".vscode not protected")
	}
	if _, ok := findProtected(p, filepath.Join(ws, ".git")); ok {
		t.Error(".git protected although the list replaces the default")
	}
}

// TestDefaultProtectedAgentFiles (issue 21, finding 5): by default the
// files agents and editors run things from are protected in every root,
// existing or not; a missing .mcp.json is kept free with a file (agents
// parse it as JSON), a missing directory name with a directory, and an
// existing one is protected as it is.
func TestDefaultProtectedAgentFiles(t *testing.T) {
	want := []string{".git", ".codex", ".agents", ".claude", ".mcp.json", ".vscode", ".idea", ".cursor", ".gemini", ".zed"}
	if got := DefaultProtectedNames(); !slices.Equal(got, want) {
		t.Fatalf("DefaultProtectedNames() = %q, want %q", got, want)
	}
	base := realTemp(t)
	ws, add := filepath.Join(base, "ws"), filepath.Join(base, "add")
	mkdirs(t, ws, add, filepath.Join(ws, ".vscode"))
	os.WriteFile(filepath.Join(ws, ".mcp.json"), []byte(`{"mcpServers":{}}`), 0o644)
	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{add}, Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{ws, add} {
		for _, n := range want {
			path := filepath.Join(root, n)
			pr, ok := findProtected(p, path)
			if !ok {
				t.Errorf("%s not protected", path)
				continue
			}
			wantKind := Missing
			switch {
			case root == ws && n == ".vscode":
				wantKind = Dir
			case root == ws && n == ".mcp.json":
				wantKind = File
			}
			if pr.Kind != wantKind {
				t.Errorf("%s kind = %v, want %v", path, pr.Kind, wantKind)
			}
			// Missing .mcp.json: an empty file keeps it; the user's own
			// (not empty) is no placeholder to hold.
			if wantFile := n == ".mcp.json" && wantKind == Missing; pr.FileWhenMissing != wantFile {
				t.Errorf("%s FileWhenMissing = %v, want %v", path, pr.FileWhenMissing, wantFile)
			}
			if p.IsWritable(filepath.Join(path, "x")) || p.IsWritable(path) {
				t.Errorf("%s writable", path)
			}
		}
	}
	for _, n := range []string{".mcp.json", "AGENTS.md", "x.toml"} {
		if !IsFileName(n) {
			t.Errorf("IsFileName(%q) = false", n)
		}
	}
	for _, n := range []string{".git", ".claude", "x", "."} {
		if IsFileName(n) {
			t.Errorf("IsFileName(%q) = true", n)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestComparePathsParentFirst(t *testing.T) {
	in := []string{"/a/b", "/a-b", "/a", "/a/b/c", "/a.b"}
	slices.SortFunc(in, comparePaths)
	pos := map[string]int{}
	for i, p := range in {
		pos[p] = i
	}
	if !(pos["/a"] < pos["/a/b"] && pos["/a/b"] < pos["/a/b/c"]) {
		t.Errorf("parents must precede children: %v", in)
	}
}

func TestProtectedIntermediateSymlinks(t *testing.T) {
	base := realTemp(t)
	ws := filepath.Join(base, "ws")
	real := filepath.Join(base, "real")
	mkdirs(t, ws, filepath.Join(real, "x"))
	// ws/.codex -> base/link/x and base/link -> base/real: re-pointing
	// base/link would redirect .codex, so the link must be protected too.
	os.Symlink(real, filepath.Join(base, "link"))
	os.Symlink(filepath.Join(base, "link", "x"), filepath.Join(ws, ".codex"))
	// A gitdir reached through a symlinked directory.
	gitReal := filepath.Join(base, "greal", "wt")
	mkdirs(t, gitReal)
	os.Symlink(filepath.Join(base, "greal"), filepath.Join(base, "glink"))
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+filepath.Join(base, "glink", "wt")+"\n"), 0o644)

	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{base},
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]ProtectedKind{
		filepath.Join(ws, ".codex"):  Symlink,
		filepath.Join(base, "link"):  Symlink,
		filepath.Join(real, "x"):     Dir,
		filepath.Join(base, "glink"): Symlink,
		gitReal:                      Dir,
	} {
		pr, ok := findProtected(p, path)
		if !ok || pr.Kind != kind {
			t.Errorf("%s: protected=%v kind=%v, want %v; all: %+v", path, ok, pr.Kind, kind, p.Protected())
		}
	}
}

func TestExtraProtectedAndExecutable(t *testing.T) {
	ws := realTemp(t)
	cfgDir := filepath.Join(ws, ".config", "agentbox")
	p, err := resolveEnv(Options{Cwd: ws, ExtraProtected: []string{cfgDir},
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	// .config is missing: its first missing component is what must not
	// be creatable.
	if pr, ok := findProtected(p, filepath.Join(ws, ".config")); !ok || pr.Kind != Missing || pr.Root != ws {
		t.Errorf("missing config dir not protected: %+v", p.Protected())
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if _, ok := findProtected(p, exe); !ok {
		t.Errorf("the executable %s is not protected", exe)
	}
}

func TestCommondirFIFOIsNotRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	ws := realTemp(t)
	gitdir := filepath.Join(ws, "gd")
	mkdirs(t, gitdir)
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: gd\n"), 0o644)
	if err := mkfifo(filepath.Join(gitdir, "commondir")); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := resolveEnv(Options{Cwd: ws}, noEnv, "linux")
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Resolve blocked on a FIFO commondir")
	}
}

func TestOwnConfigAndStateProtectedByDefault(t *testing.T) {
	home := realTemp(t)
	env := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	// The workspace is $HOME, so agentbox's config and state lie in it.
	p, err := resolveEnv(Options{Cwd: home,
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(home, ".config"), filepath.Join(home, ".local")} {
		if pr, ok := findProtected(p, want); !ok || pr.Kind != Missing {
			t.Errorf("%s (first missing component of agentbox's own dirs) not protected: %+v", want, p.Protected())
		}
	}
	if got := agentdirs.State(func(k string) string { return map[string]string{"LOCALAPPDATA": `C:\Users\u\AppData\Local`}[k] }, "windows"); !strings.HasSuffix(got, "agentbox") {
		t.Errorf("windows state dir = %q", got)
	}
}

func TestGitdirReadAsGitDoes(t *testing.T) {
	base := realTemp(t)
	ws := filepath.Join(base, "ws")
	other := filepath.Join(base, "other")
	mkdirs(t, ws, filepath.Join(other, "sub"), filepath.Join(other, "r", ".git"), filepath.Join(ws, "r", ".git"))
	// ws/l -> other/sub, so "l/../r/.git" is other/r/.git to the kernel
	// (and to git), not ws/r/.git as textual cleaning would say.
	os.Symlink(filepath.Join(other, "sub"), filepath.Join(ws, "l"))
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: l/../r/.git\n"), 0o644)
	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{base},
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := findProtected(p, filepath.Join(other, "r", ".git")); !ok || pr.Kind != Dir {
		t.Errorf("gitdir through l/.. not protected where git looks: %+v", p.Protected())
	}
	if _, ok := findProtected(p, filepath.Join(ws, "l")); !ok {
		t.Errorf("the link on the way to the gitdir is not pinned")
	}

	// Trailing spaces are part of the path for git.
	ws2 := filepath.Join(base, "ws2")
	mkdirs(t, ws2, filepath.Join(base, "g", ".git "))
	os.WriteFile(filepath.Join(ws2, ".git"), []byte("gitdir: "+filepath.Join(base, "g", ".git ")+"\r\n"), 0o644)
	p, err = resolveEnv(Options{Cwd: ws2, AddDirs: []string{base},
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := findProtected(p, filepath.Join(base, "g", ".git ")); !ok {
		t.Errorf(`gitdir ".git " (trailing space) not protected: %+v`, p.Protected())
	}
}
func TestAllowUnixSockets(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.sock")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link.sock")); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("cfg.toml", []byte("[sandbox_workspace_write]\nallow_unix_sockets = [\""+dir+"/link.sock\", \""+dir+"//missing.sock\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(Options{Cwd: dir, Config: cfg, Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	rdir, _ := filepath.EvalSymlinks(dir)
	want := []string{filepath.Join(rdir, "real.sock"), filepath.Join(dir, "missing.sock")}
	if !slices.Equal(p.AllowUnixSockets(), want) {
		t.Errorf("AllowUnixSockets = %q, want %q", p.AllowUnixSockets(), want)
	}
}
