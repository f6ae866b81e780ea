package darwin

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

var update = flag.Bool("update", false, "rewrite the golden profiles in testdata")

var names = []string{".git", ".codex", ".agents"}

// goldenCases are the policies whose profiles are kept in testdata.
var goldenCases = []struct {
	name string
	in   Input
}{
	{"read-only", Input{}},
	{"read-only-network", Input{Network: NetworkOn}},
	// share_slash_tmp = true: the host's temporary directories are roots.
	{"workspace-write", Input{
		WritableRoots:  []string{"/Users/dev/project", "/private/tmp", "/private/var/folders/xy/abc123/T"},
		ProtectedNames: names,
	}},
	// The default: private temporary directories only.
	{"workspace-write-private-tmp", privateTmpInput},
	{"workspace-write-network", Input{
		WritableRoots:  []string{"/Users/dev/project"},
		ProtectedNames: names,
		Network:        NetworkOn,
	}},
	{"workspace-write-proxy", Input{
		WritableRoots:  []string{"/Users/dev/project"},
		ProtectedNames: names,
		Network:        NetworkLocalhostPort,
		ProxyPort:      3128,
	}},
	{"workspace-write-proxy-socks", Input{
		WritableRoots:  []string{"/Users/dev/project"},
		ProtectedNames: names,
		Network:        NetworkLocalhostPort,
		ProxyPort:      3128,
		SOCKSPort:      1080,
	}},
	{"worktree-gitdir-elsewhere", Input{
		WritableRoots:  []string{"/Users/dev/wt"},
		ProtectedNames: names,
		// The worktree's .git file, its gitdir and the main repository's
		// common dir, as the policy resolves them.
		Protected: []string{"/Users/dev/wt/.git", "/Users/dev/main/.git/worktrees/wt", "/Users/dev/main/.git"},
	}},
	{"nested-roots-and-deep-protected", Input{
		WritableRoots:  []string{"/Users/dev/project", "/Users/dev/project/vendor/lib"},
		ProtectedNames: []string{".git"},
		Protected:      []string{"/Users/dev/project/sub/.git", "/Users/dev/project/.env"},
	}},
	{"root-is-slash", Input{WritableRoots: []string{"/"}, ProtectedNames: []string{".git"}}},
	{"pty", Input{WritableRoots: []string{"/Users/dev/project"}, AllowPTY: true}},
	{"git-writes-and-caches", gitWritesInput},
	{"hidden", hiddenInput},
	{"read-only-hidden", Input{Hidden: hiddenInput.Hidden, Reopen: hiddenInput.Reopen, HideRules: hiddenInput.HideRules}},
}

// privateTmpInput is the default workspace-write policy's input: the
// workspace's private temporary directories (for /tmp and $TMPDIR) in the
// protected state directory, and neither /private/tmp nor the host's
// $TMPDIR among the roots.
var privateTmpInput = Input{
	WritableRoots:  []string{"/Users/dev/project"},
	ProtectedNames: names,
	Protected:      []string{"/Users/dev/.local/state/agentbox"},
	TempDirs: []string{"/Users/dev/.local/state/agentbox/tmp/0123456789abcdef/tmp",
		"/Users/dev/.local/state/agentbox/tmp/0123456789abcdef/tmpdir"},
}

// TestPrivateTmpDecisions: by default the host's /tmp and $TMPDIR are not
// writable (a server listening there would reach the user's programs),
// the workspace's private temporary directories are, and the rest of
// the state directory is not.
func TestPrivateTmpDecisions(t *testing.T) {
	m := modelOf(t, privateTmpInput)
	const priv = "/Users/dev/.local/state/agentbox/tmp/0123456789abcdef"
	cases := []decision{
		{"file-write-create", "/private/tmp/tmux-501/default", false},
		{"file-write-create", "/private/tmp/x", false},
		{"file-write-create", "/private/var/folders/xy/abc123/T/ssh-agent.sock", false},
		{"file-write-create", priv + "/tmpdir/tmux-501/default", true},
		{"file-write-create", priv + "/tmp/x", true},
		{"file-write-unlink", priv + "/tmpdir/x", true},
		{"file-write-create", priv + "/lock", false},
		{"file-write-create", priv + "/other", false},
		{"file-write-create", "/Users/dev/.local/state/agentbox/placeholders/x", false},
		{"file-write-create", "/Users/dev/project/x", true},
	}
	m.check(t, cases)
}

// gitWritesInput has allow_git_writes and a private tool cache.
var gitWritesInput = Input{
	WritableRoots:  []string{"/Users/dev/project"},
	ProtectedNames: names,
	Protected:      []string{"/Users/dev/.local/state/agentbox"},
	GitWritable:    []string{"/Users/dev/project/.git"},
	GitReadOnly: []string{"/Users/dev/project/.git/config", "/Users/dev/project/.git/config.worktree",
		"/Users/dev/project/.git/commondir", "/Users/dev/project/.git/hooks", "/Users/dev/project/.git/objects/info"},
	CacheDirs: []string{"/Users/dev/.local/state/agentbox/toolcache/0123456789abcdef/private"},
}

// TestGitWritesDecisions: with allow_git_writes the everyday git writes
// are allowed and what makes git run a program is not, in any spelling;
// the private cache is writable and the rest of the state directory not.
func TestGitWritesDecisions(t *testing.T) {
	m := modelOf(t, gitWritesInput)
	const git = "/Users/dev/project/.git"
	const cache = "/Users/dev/.local/state/agentbox/toolcache/0123456789abcdef/private"
	cases := []decision{
		{"file-write-create", git + "/index.lock", true},
		{"file-write-data", git + "/index", true},
		{"file-write-create", git + "/objects/ab/cdef", true},
		{"file-write-create", git + "/refs/heads/feat", true},
		{"file-write-data", git + "/HEAD", true},
		{"file-write-create", git + "/logs/refs/stash", true},
		{"file-write-unlink", git + "/index.lock", true},

		{"file-write-data", git + "/config", false},
		{"file-write-create", git + "/config.lock", true}, // the lock alone changes nothing
		{"file-write-create", git + "/CONFIG.worktree", false},
		{"file-write-create", git + "/config.worktree", false},
		{"file-write-create", git + "/commondir", false},
		{"file-write-create", git + "/CommonDir", false},
		{"file-write-create", git + "/hooks/pre-commit", false},
		{"file-write-create", git + "/Hooks", false},
		{"file-write-create", git + "/objects/info/alternates", false},
		{"file-write-unlink", git + "/hooks", false},
		{"file-write-unlink", git + "/config", false},
		{"file-write-unlink", git + "/objects", false},
		{"file-write-unlink", git, false},
		{"file-write-create", "/Users/dev/project/.git.new/config", true}, // a different name

		{"file-write-create", cache + "/http/x", true},
		{"file-write-create", "/Users/dev/.local/state/agentbox/placeholders/x", false},
		{"file-write-create", "/Users/dev/.local/state/agentbox/toolcache/0123456789abcdef/pip/upper", false},
	}
	m.check(t, cases)
	if _, _, err := Profile(Input{WritableRoots: []string{"/w"}, GitWritable: []string{"/w/.git"}, GitReadOnly: []string{"/elsewhere/config"}}); err == nil {
		t.Error("a read-only git path outside the git directories was accepted")
	}
}

func golden(profile string, params []Param) string {
	var b strings.Builder
	b.WriteString(profile)
	b.WriteString("\n; ---- parameters (not part of the profile) ----\n")
	for _, p := range params {
		b.WriteString("; -D " + p.Key + "=" + p.Value + "\n")
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			profile, params, err := Profile(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			newModel(t, profile, params) // parses, every param defined
			got := golden(profile, params)
			file := filepath.Join("testdata", tc.name+".sbpl")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s (run go test -update and review the diff):\n%s", file, got)
			}
		})
	}
}

// TestDecisions runs the profile through the model of Seatbelt in
// sbpl_test.go and checks what a command may and may not write.
func TestDecisions(t *testing.T) {
	in := Input{
		WritableRoots:  []string{"/Users/dev/project", "/private/tmp"},
		ProtectedNames: names,
		Protected:      []string{"/Users/dev/main/.git/worktrees/wt", "/private/tmp/shared-gitdir"},
	}
	m := modelOf(t, in)
	const ws = "/Users/dev/project"
	cases := []decision{
		{"file-write-data", ws + "/main.go", true},
		{"file-write-create", ws + "/new/dir/file", true},
		{"file-write-unlink", ws + "/main.go", true},
		{"file-write-create", "/private/tmp/scratch", true},
		{"file-write-data", "/dev/null", true},
		{"file-read-data", "/etc/passwd", true},

		{"file-write-data", "/Users/dev/other/file", false},
		{"file-write-create", "/Users/dev/project2/file", false}, // prefix, not subpath
		{"file-write-data", "/etc/hosts", false},
		{"file-write-data", "/dev/disk0", false},

		// Protected names, existing or not, in every spelling.
		{"file-write-data", ws + "/.git/config", false},
		{"file-write-create", ws + "/.git/hooks/pre-commit", false},
		{"file-write-create", ws + "/.git", false},
		{"file-write-create", ws + "/.GIT", false},
		{"file-write-create", ws + "/.Git/hooks/post-checkout", false},
		{"file-write-create", ws + "/.codex", false},
		{"file-write-create", ws + "/.CODEX/config.toml", false},
		{"file-write-create", ws + "/.agents", false},
		{"file-write-create", ws + "/.AgEnTs/x", false},
		{"file-write-create", ws + "/.agent\u017f", false},              // LONG S
		{"file-write-create", ws + "/.g\u200cit", false},                // ZERO WIDTH NON-JOINER
		{"file-write-create", ws + "/\ufeff.git\u200d/config", false},   // BOM first, ZWJ last
		{"file-write-create", ws + "/.\u202eg\u206ai\u200ft", false},    // several ignorables
		{"file-write-create", "/private/tmp/.Git", false},               // every root
		{"file-write-data", "/private/tmp/shared-gitdir/config", false}, // extra protected path
		{"file-write-unlink", ws + "/.git", false},
		{"file-write-unlink", ws + "/.git/index", false},

		// Look-alikes that are different names stay writable.
		{"file-write-create", ws + "/.github/workflows/ci.yml", true},
		{"file-write-create", ws + "/.gitignore", true},
		{"file-write-create", ws + "/git", true},
		{"file-write-create", ws + "/.gi", true},
		{"file-write-create", ws + "/x.git", true},
		{"file-write-create", ws + "/.ｇit", true}, // fullwidth g: a distinct name on APFS
		// A nested clone's .git is not a protected name of a root.
		{"file-write-create", ws + "/third_party/dep/.git/config", true},

		// Ancestors of protected paths cannot be moved or removed.
		{"file-write-unlink", ws, false},
		{"file-write-unlink", "/Users/dev", false},
		{"file-write-unlink", "/private/tmp", false},
		{"file-write-unlink", "/Users/dev/main/.git/worktrees", false},
		// But writing inside them is fine.
		{"file-write-create", ws + "/README", true},
	}
	m.check(t, cases)
}

func TestReadOnlyWritesNothing(t *testing.T) {
	profile, params, err := Profile(Input{})
	if err != nil {
		t.Fatal(err)
	}
	if len(params) != 0 {
		t.Errorf("read-only profile has parameters %v", params)
	}
	m := newModel(t, profile, params)
	for _, p := range []string{"/Users/dev/project/x", "/private/tmp/x", "/tmp/x"} {
		if m.allowed(t, "file-write-create", p) {
			t.Errorf("read-only profile allows creating %s", p)
		}
	}
	if !m.allowed(t, "file-write-data", "/dev/null") {
		t.Error("read-only profile does not allow /dev/null")
	}
	if strings.Contains(profile, "network") && !strings.Contains(profile, "Network: off") {
		t.Error("read-only profile mentions network rules")
	}
}

func TestNetworkRules(t *testing.T) {
	for _, tc := range []struct {
		in        Input
		want, not []string
	}{
		{Input{}, nil, []string{"(allow network", "system-socket", "trustd"}},
		{Input{Network: NetworkOn}, []string{"(allow network*)", "com.apple.trustd"}, nil},
		{Input{Network: NetworkLocalhostPort, ProxyPort: 8080}, []string{`(allow network-outbound (remote ip "localhost:8080"))`}, []string{"(allow network*)", "trustd"}},
	} {
		profile, _, err := Profile(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(profile, w) {
				t.Errorf("network %v: profile lacks %q", tc.in.Network, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(profile, n) {
				t.Errorf("network %v: profile contains %q", tc.in.Network, n)
			}
		}
	}
}

func TestInvalidInput(t *testing.T) {
	for name, in := range map[string]Input{
		"relative root":       {WritableRoots: []string{"project"}},
		"empty root":          {WritableRoots: []string{""}},
		"unclean root":        {WritableRoots: []string{"/Users/dev/../dev/project"}},
		"trailing slash":      {WritableRoots: []string{"/Users/dev/"}},
		"double slash":        {WritableRoots: []string{"//Users/dev"}},
		"NUL in root":         {WritableRoots: []string{"/Users/dev\x00/x"}},
		"relative protected":  {Protected: []string{".git"}},
		"slash protected":     {Protected: []string{"/"}},
		"name with slash":     {ProtectedNames: []string{"a/b"}},
		"name with quote":     {ProtectedNames: []string{`.git"`}},
		"name with paren":     {ProtectedNames: []string{".git)"}},
		"non-ASCII name":      {ProtectedNames: []string{".gït"}},
		"dot name":            {ProtectedNames: []string{".."}},
		"empty name":          {ProtectedNames: []string{""}},
		"port without proxy":  {ProxyPort: 80},
		"proxy without port":  {Network: NetworkLocalhostPort},
		"proxy port too high": {Network: NetworkLocalhostPort, ProxyPort: 70000},
		"socks port too high": {Network: NetworkLocalhostPort, ProxyPort: 80, SOCKSPort: 70000},
		"socks without proxy": {SOCKSPort: 1080},
		"unknown network":     {Network: NetworkMode(7)},
	} {
		if _, _, err := Profile(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestLigatureNames checks the coverage of names that contain letter runs
// a ligature folds to, and that such names stay bounded.
func TestLigatureNames(t *testing.T) {
	in := Input{WritableRoots: []string{"/w"}, ProtectedNames: []string{".first", ".office", ".class"}}
	m := modelOf(t, in)
	for _, p := range []string{"/w/.\ufb01rst", "/w/.FIR\ufb06", "/w/.o\ufb03ce", "/w/.o\ufb00ICE", "/w/.cla\u00df", "/w/.cla\u1e9e", "/w/.cla\u017fs"} {
		if m.allowed(t, "file-write-create", p) {
			t.Errorf("creating %q is allowed", p)
		}
	}
	if !m.allowed(t, "file-write-create", "/w/.firsts") {
		t.Error("a longer name is blocked")
	}
	if _, _, err := Profile(Input{ProtectedNames: []string{strings.Repeat("ff", 40)}}); err == nil {
		t.Error("a name with 80 f's was accepted; its expression should be refused as too large")
	}
}

func TestSandboxExecArgs(t *testing.T) {
	got := SandboxExecArgs("(version 1)", []Param{{"ROOT_0", "/a=b"}, {"ROOT_1", "-x"}}, []string{"sh", "-c", "echo hi"})
	want := []string{"-p", "(version 1)", "-D", "ROOT_0=/a=b", "-D", "ROOT_1=-x", "--", "sh", "-c", "echo hi"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// hostile are path components chosen to break out of an SBPL string, regex
// or comment if they were ever written into the profile.
var hostile = []string{
	`quo"te`,
	`paren)(allow default)(`,
	`#"regex"`,
	"new\nline (allow file-write* (subpath \"\"))", // components hold no '/'.
	"; comment",
	`back\slash\"`,
	"ünïcödé-NFC-\u00e9",
	"nfd-e\u0301",
	"\u202eright-to-left",
	"$(param)",
	`(param "ROOT_0")`,
	"tab\there",
	" leading space",
	"-D",
	"=equals=",
}

// TestHostilePaths checks that path text never reaches the profile: a
// policy whose components are all hostile produces exactly the profile (and
// the same parse tree) of a benign policy of the same shape, its parameters
// differ only in values, and the model still decides by those values.
func TestHostilePaths(t *testing.T) {
	shape := func(c func(i int) string) Input {
		return Input{
			WritableRoots:  []string{"/" + c(0) + "/" + c(1), "/" + c(2)},
			ProtectedNames: names,
			Protected:      []string{"/" + c(3) + "/" + c(4) + "/" + c(5), "/" + c(0) + "/" + c(1) + "/" + c(6) + "/.git"},
			Network:        NetworkLocalhostPort,
			ProxyPort:      3128,
		}
	}
	benign := shape(func(i int) string { return "c" + string(rune('a'+i)) })
	for k := range hostile {
		bad := shape(func(i int) string { return hostile[(k+i)%len(hostile)] })
		t.Run(strings.ReplaceAll(hostile[k], "\n", `\n`), func(t *testing.T) {
			wantProfile, wantParams, err := Profile(benign)
			if err != nil {
				t.Fatal(err)
			}
			gotProfile, gotParams, err := Profile(bad)
			if err != nil {
				t.Fatal(err)
			}
			if gotProfile != wantProfile {
				t.Fatalf("hostile paths changed the profile text:\n%s", gotProfile)
			}
			for i := range gotParams {
				if strings.Contains(gotProfile, gotParams[i].Value) {
					t.Errorf("parameter value %q appears in the profile", gotParams[i].Value)
				}
			}
			for _, h := range hostile {
				// `(param "ROOT_0")` and "-D" occur in every profile;
				// they are in the list to be tried as path text.
				if strings.Contains(gotProfile, h) && !strings.Contains(wantProfile, h) {
					t.Errorf("hostile text %q appears in the profile", h)
				}
			}
			gotTree, err := parseSBPL(gotProfile)
			if err != nil {
				t.Fatalf("profile does not parse: %v", err)
			}
			wantTree, _ := parseSBPL(wantProfile)
			if !reflect.DeepEqual(gotTree, wantTree) {
				t.Fatal("parse trees differ")
			}
			if len(gotParams) != len(wantParams) {
				t.Fatalf("%d parameters, want %d", len(gotParams), len(wantParams))
			}
			for i := range gotParams {
				if gotParams[i].Key != wantParams[i].Key {
					t.Errorf("parameter %d key %q, want %q", i, gotParams[i].Key, wantParams[i].Key)
				}
			}
			// The values, not the text, decide.
			m := newModel(t, gotProfile, gotParams)
			root := bad.WritableRoots[0]
			if !m.allowed(t, "file-write-create", root+"/file") {
				t.Errorf("cannot write in hostile root %q", root)
			}
			for _, p := range []string{root + "/.git/config", root + "/.GIT", bad.Protected[0] + "/x", bad.Protected[1] + "/config"} {
				if m.allowed(t, "file-write-create", p) {
					t.Errorf("can write protected %q", p)
				}
			}
			if m.allowed(t, "file-write-create", "/elsewhere") {
				t.Error("can write outside the roots")
			}
			if m.allowed(t, "file-write-unlink", root) {
				t.Errorf("can rename hostile root %q", root)
			}
		})
	}
}

// FuzzProfile checks the invariant behind TestHostilePaths for arbitrary
// components: the text depends only on the shape of the policy.
func FuzzProfile(f *testing.F) {
	for _, h := range hostile {
		f.Add(h, "x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b || strings.ContainsAny(a+b, "/\x00") || a == "" || b == "" || a == "." || a == ".." || b == "." || b == ".." {
			t.Skip()
		}
		in := func(x, y string) Input {
			return Input{WritableRoots: []string{"/" + x + "/" + y}, ProtectedNames: names, Protected: []string{"/" + y + "/" + x}}
		}
		want, _, err := Profile(in("p", "q"))
		if err != nil {
			t.Fatal(err)
		}
		got, params, err := Profile(in(a, b))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("components %q, %q changed the profile", a, b)
		}
		newModel(t, got, params)
	})
}

// TestDefaultNamesDecisions (issue 21, finding 5): with the policy's
// default list, what agents and editors run on the host from a workspace
// is unwritable in every spelling APFS folds together, existing or not
// (macOS needs no placeholder: the profile denies creating the name), and
// cannot be removed or moved aside; names that only look alike stay
// writable.
func TestDefaultNamesDecisions(t *testing.T) {
	const ws = "/Users/dev/project"
	m := modelOf(t, Input{WritableRoots: []string{ws, "/private/tmp"}, ProtectedNames: policy.DefaultProtectedNames()})
	cases := []decision{
		{"file-write-create", ws + "/.claude/settings.json", false},
		{"file-write-data", ws + "/.claude/settings.json", false},
		{"file-write-create", ws + "/.Claude/settings.json", false},
		{"file-write-create", ws + "/.claude", false},
		{"file-write-unlink", ws + "/.claude", false},
		{"file-write-create", ws + "/.mcp.json", false},
		{"file-write-data", ws + "/.mcp.json", false},
		{"file-write-create", ws + "/.MCP.JSON", false},
		{"file-write-unlink", ws + "/.mcp.json", false},
		{"file-write-create", ws + "/.vscode/tasks.json", false},
		{"file-write-create", ws + "/.VSCode/settings.json", false},
		{"file-write-create", ws + "/.idea/workspace.xml", false},
		{"file-write-create", ws + "/.cursor/mcp.json", false},
		{"file-write-create", ws + "/.gemini/settings.json", false},
		{"file-write-create", ws + "/.zed/settings.json", false},
		{"file-write-create", ws + "/.ZED", false},
		{"file-write-create", "/private/tmp/.claude", false},

		{"file-write-create", ws + "/.mcpXjson", true},
		{"file-write-create", ws + "/.mcp.json.bak", true},
		{"file-write-create", ws + "/x.mcp.json", true},
		{"file-write-create", ws + "/.claudex", true},
		{"file-write-create", ws + "/sub/.vscode/settings.json", true}, // not a root's own
		{"file-write-create", ws + "/main.go", true},
	}
	m.check(t, cases)
}
