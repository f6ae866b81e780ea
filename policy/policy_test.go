package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
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
		{"ok", "sandbox_mode = \"read-only\"\n[sandbox_workspace_write]\nwritable_roots = [\"/x\"]\nnetwork_access = true\nexclude_tmpdir_env_var = true\nexclude_slash_tmp = true\nshare_slash_tmp = true\n[windows]\nsandbox = \"elevated\"\n[linux]\nallow_degraded = true\n", nil},
		{"unknown top key", "sandbox = \"x\"\n", []string{"unknown key", "sandbox", "cfg.toml"}},
		{"unknown nested key", "[sandbox_workspace_write]\nwritable_root = []\n", []string{"unknown key", "sandbox_workspace_write.writable_root", "cfg.toml"}},
		{"misspelt share_slash_tmp", "[sandbox_workspace_write]\nshare_slash_temp = true\n", []string{"unknown key", "sandbox_workspace_write.share_slash_temp", "cfg.toml"}},
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
	share := &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ShareSlashTmp: ptr(true)}}
	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{extra}, Config: share}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode() != WorkspaceWrite || p.Network() || p.Cwd() != ws {
		t.Errorf("defaults: %+v", p)
	}
	for _, want := range []string{ws, extra, tmpdir, "/tmp"} {
		if !slices.Contains(p.WritableRoots(), want) {
			t.Errorf("share_slash_tmp: writable roots %v lack %s", p.WritableRoots(), want)
		}
	}
	if len(p.PrivateTemps()) != 0 {
		t.Errorf("share_slash_tmp: private temps %+v, want none", p.PrivateTemps())
	}

	yes := true
	cfg := &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: &yes, ExcludeTmpdirEnvVar: &yes, ShareSlashTmp: &yes}}
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
	if len(p.WritableRoots()) != 0 || !p.Network() || len(p.PrivateTemps()) != 0 {
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

// TestPrivateTemps: by default /tmp and $TMPDIR are no writable roots but
// private per-workspace directories in the state directory; a $TMPDIR
// under /tmp lies inside /tmp's, one inside the workspace is the
// workspace's own; without a state directory nothing is writable.
func TestPrivateTemps(t *testing.T) {
	ws, home, tmpdir := outsideTmp(t), outsideTmp(t), outsideTmp(t)
	state := filepath.Join(home, ".local", "state", "agentbox")
	base := filepath.Join(state, "tmp", agentdirs.WorkspaceKey(ws))
	underTmp, err := os.MkdirTemp("/tmp", "abpolicy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(underTmp) })
	inWS := filepath.Join(ws, "tmp")
	mkdirs(t, inWS)
	cases := []struct {
		name   string
		tmpdir string
		cfg    WorkspaceWriteSection
		home   string
		want   []PrivateTemp
		dir    string // TempDirFor
	}{
		{"default", tmpdir, WorkspaceWriteSection{}, home,
			[]PrivateTemp{{Path: "/tmp", Dir: filepath.Join(base, "tmp"), Env: ""}, {Path: tmpdir, Dir: filepath.Join(base, "tmpdir"), Env: "TMPDIR"}}, filepath.Join(base, "tmpdir")},
		{"no TMPDIR", "", WorkspaceWriteSection{}, home,
			[]PrivateTemp{{Path: "/tmp", Dir: filepath.Join(base, "tmp"), Env: ""}}, filepath.Join(base, "tmp")},
		{"TMPDIR under /tmp", underTmp, WorkspaceWriteSection{}, home,
			[]PrivateTemp{{Path: "/tmp", Dir: filepath.Join(base, "tmp"), Env: ""}, {Path: underTmp, Dir: filepath.Join(base, "tmp", filepath.Base(underTmp)), Env: "TMPDIR"}}, filepath.Join(base, "tmp", filepath.Base(underTmp))},
		{"TMPDIR is /tmp", "/tmp", WorkspaceWriteSection{}, home,
			[]PrivateTemp{{Path: "/tmp", Dir: filepath.Join(base, "tmp"), Env: ""}, {Path: "/tmp", Dir: filepath.Join(base, "tmp"), Env: "TMPDIR"}}, filepath.Join(base, "tmp")},
		{"TMPDIR in the workspace", inWS, WorkspaceWriteSection{}, home,
			[]PrivateTemp{{Path: "/tmp", Dir: filepath.Join(base, "tmp"), Env: ""}}, filepath.Join(base, "tmp")},
		{"exclude_slash_tmp", underTmp, WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}, home,
			[]PrivateTemp{{Path: underTmp, Dir: filepath.Join(base, "tmpdir"), Env: "TMPDIR"}}, filepath.Join(base, "tmpdir")},
		{"both excluded", tmpdir, WorkspaceWriteSection{ExcludeSlashTmp: ptr(true), ExcludeTmpdirEnvVar: ptr(true)}, home, nil, ""},
		{"no state directory", tmpdir, WorkspaceWriteSection{}, "", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"TMPDIR": c.tmpdir, "HOME": c.home}
			p, err := resolveEnv(Options{Cwd: ws, Config: &Config{SandboxWorkspaceWrite: c.cfg}}, func(k string) string { return env[k] }, "linux")
			if err != nil {
				t.Fatal(err)
			}
			got := p.PrivateTemps()
			for i := range got {
				got[i].Keep = nil // the test binary's directory, in /tmp: TestPrivateTempsKeep
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("private temps = %+v\nwant %+v", got, c.want)
			}
			if got := p.TempDirFor(); got != c.dir {
				t.Errorf("TempDirFor = %q, want %q", got, c.dir)
			}
			for _, r := range p.WritableRoots() {
				if r == "/tmp" || r == c.tmpdir && r != inWS {
					t.Errorf("writable roots %v hold the host's %s", p.WritableRoots(), r)
				}
			}
			for _, pr := range p.Protected() {
				if fspath.Within(pr.Path, "/tmp") && pr.Root == "/tmp" {
					t.Errorf("protected %s in the host's /tmp (root %s): /tmp is no writable root", pr.Path, pr.Root)
				}
			}
		})
	}
}

// TestPrivateTempsKeep: a home inside /tmp stays visible in the private
// /tmp; one outside it is not listed.
func TestPrivateTempsKeep(t *testing.T) {
	ws, inTmp, outside := outsideTmp(t), realTemp(t), outsideTmp(t)
	for _, c := range []struct {
		home string
		keep bool
	}{{inTmp, true}, {outside, false}} {
		env := map[string]string{"HOME": c.home}
		p, err := resolveEnv(Options{Cwd: ws}, func(k string) string { return env[k] }, "linux")
		if err != nil {
			t.Fatal(err)
		}
		pts := p.PrivateTemps()
		if len(pts) == 0 || pts[0].Path != "/tmp" {
			t.Fatalf("private temps %+v: want /tmp first", pts)
		}
		if got := slices.Contains(pts[0].Keep, c.home); got != c.keep {
			t.Errorf("HOME=%s: kept %v in %v, want %v", c.home, got, pts[0].Keep, c.keep)
		}
	}
}

// outsideTmp is a fresh directory outside /tmp (symlinks resolved).
func outsideTmp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "abpolicy-")
	if err != nil {
		t.Skipf("no directory outside /tmp to test with: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func TestResolveWindowsTemp(t *testing.T) {
	ws, temp := realTemp(t), realTemp(t)
	env := func(k string) string {
		if k == "TEMP" || k == "TMP" {
			return temp
		}
		return ""
	}
	p, err := resolveEnv(Options{Cwd: ws, Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ShareSlashTmp: ptr(true)}}}, env, "windows")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.WritableRoots(), temp) || slices.Contains(p.WritableRoots(), "/tmp") {
		t.Errorf("windows roots = %v: want %%TEMP%%, not /tmp", p.WritableRoots())
	}
	// Private (the default): no root. A %LOCALAPPDATA% this OS cannot
	// take for absolute means no state directory here: placement
	// itself is tested with privateTemps.
	p, err = resolveEnv(Options{Cwd: ws}, env, "windows")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p.WritableRoots(), temp) {
		t.Errorf("windows roots = %v: %%TEMP%% is private by default", p.WritableRoots())
	}
	state := `C:\Users\u\AppData\Local\agentbox`
	dir := state + `\tmp\` + agentdirs.WorkspaceKey(`C:\w`) + `\temp`
	got := privateTemps([]tempDir{{`C:\Users\u\AppData\Local\Temp`, "TEMP"}, {`C:\Users\u\AppData\Local\Temp`, "TMP"}, {`C:\w\tmp`, "TMP"}},
		[]string{`C:\w`}, nil, `C:\w`, state, "windows")
	want := []PrivateTemp{{Path: `C:\Users\u\AppData\Local\Temp`, Dir: dir, Env: "TEMP"}, {Path: `C:\Users\u\AppData\Local\Temp`, Dir: dir, Env: "TMP"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("windows private temps = %+v, want %+v", got, want)
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
// existing or not; a missing name (.mcp.json included) is kept free with
// a directory, and an existing one is protected as it is.
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
			// A missing .mcp.json is kept free with a directory, like
			// the others: an empty file would show in git status (and a
			// command's git add -A would commit it).
			if pr.FileWhenMissing {
				t.Errorf("%s FileWhenMissing, want a directory placeholder", path)
			}
			if p.IsWritable(filepath.Join(path, "x")) || p.IsWritable(path) {
				t.Errorf("%s writable", path)
			}
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
	ws, home := realTemp(t), realTemp(t)
	env := func(k string) string {
		return map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(ws, "cfg"), "XDG_STATE_HOME": filepath.Join(ws, "state")}[k]
	}
	// agentbox's config and state lie in the workspace.
	p, err := resolveEnv(Options{Cwd: ws,
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(ws, "cfg"), filepath.Join(ws, "state")} {
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

// TestAllowGitWritesOption: Options.AllowGitWrites (--allow-git-writes)
// sets allow_git_writes, and overrides the config either way.
func TestAllowGitWritesOption(t *testing.T) {
	ws := realTemp(t)
	yes, no := true, false
	for _, c := range []struct {
		opt, cfg *bool
		want     bool
	}{
		{nil, nil, false}, {&yes, nil, true}, {nil, &yes, true}, {&no, &yes, false}, {&yes, &no, true},
	} {
		p, err := resolveEnv(Options{Cwd: ws, AllowGitWrites: c.opt, Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{AllowGitWrites: c.cfg}}}, noEnv, "linux")
		if err != nil {
			t.Fatal(err)
		}
		if p.AllowGitWrites() != c.want {
			t.Errorf("option %v, config %v: AllowGitWrites %v, want %v", c.opt, c.cfg, p.AllowGitWrites(), c.want)
		}
	}
}
