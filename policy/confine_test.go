package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfineRule: the roots that confine nothing, on each OS, and
// subdirectories that stay fine.
func TestConfineRule(t *testing.T) {
	linux := confineRule{goos: "linux",
		homes:  []namedDir{{path: "/home/u", what: "home"}, {path: "/srv/acct", what: "account home"}, {path: "/run/user/1000", what: "runtime", runtime: true}},
		system: append(systemDirs["linux"], "/usr/bin")}
	darwin := confineRule{goos: "darwin", homes: []namedDir{{path: "/Users/u", what: "home"}}, system: systemDirs["darwin"]}
	windows := confineRule{goos: "windows",
		homes:  []namedDir{{path: `C:\Users\u`, what: "profile"}},
		system: append([]string{`D:\Win`}, windowsSystem...)}
	cases := []struct {
		rule    confineRule
		path    string
		refused bool
	}{
		{linux, "/", true},
		{linux, "/home", true},
		{linux, "/home/u", true},
		{linux, "/srv", true},
		{linux, "/srv/acct", true},
		{linux, "/run/user/1000", true},
		{linux, "/run/user", true},
		{linux, "/run", true},
		{linux, "/usr", true},
		{linux, "/usr/bin", true}, // /bin, resolved on a merged /usr
		{linux, "/etc", true},
		{linux, "/var", true},
		{linux, "/opt", true},
		{linux, "/boot", true},
		{linux, "/lib64", true},
		{linux, "/tmp", true},
		{linux, "/proc", true},
		{linux, "/sys", true},
		{linux, "/dev", true},
		{linux, "/home/u/src", false},
		{linux, "/home/v", false},
		{linux, "/var/tmp", false},
		{linux, "/var/tmp/x", false},
		{linux, "/tmp/x", false},
		{linux, "/opt/tool", false},
		{linux, "/usr/local/src", false},
		{linux, "/run/user/1000/x", false},
		{linux, "/srv/other", false},

		{darwin, "/", true},
		{darwin, "/Users", true},
		{darwin, "/users/U", true}, // APFS: case does not tell names apart
		{darwin, "/private/tmp", true},
		{darwin, "/private/var", true},
		{darwin, "/System", true},
		{darwin, "/Library", true},
		{darwin, "/Users/u/project", false},
		{darwin, "/private/var/folders", false},

		{windows, `C:\`, true},
		{windows, `D:\`, true},
		{windows, `\\server\share`, true},
		{windows, `C:\Users`, true},
		{windows, `c:\users\U`, true},
		{windows, `C:\Windows`, true},
		{windows, `C:\Program Files`, true},
		{windows, `C:\Program Files (x86)`, true},
		{windows, `C:\ProgramData`, true},
		{windows, `d:\win`, true},
		{windows, `C:\Users\u\src`, false},
		{windows, `C:\Windows\Temp`, false},
		{windows, `D:\work`, false},
		{windows, `\\server\share\proj`, false},
	}
	for _, c := range cases {
		why := c.rule.check(c.path)
		if (why != "") != c.refused {
			t.Errorf("%s %s: check = %q, want refused=%v", c.rule.goos, c.path, why, c.refused)
		}
	}
}

// TestResolveRefusesRootsThatConfineNothing: in workspace-write mode the
// workspace, an added directory or a configured root that is /, the home
// or above it, or a system directory, is refused with a message naming
// it and the fix; read-only and danger-full-access still run there.
func TestResolveRefusesRootsThatConfineNothing(t *testing.T) {
	home := outsideTmp(t)
	account := outsideTmp(t)
	old := accountHome
	accountHome = func() string { return account }
	t.Cleanup(func() { accountHome = old })
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	sub := filepath.Join(home, "src")
	mkdirs(t, sub)
	link := filepath.Join(outsideTmp(t), "slash")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	fine := outsideTmp(t) // /var/tmp/x
	cases := []struct {
		name string
		o    Options
		want []string // substrings of the error; nil = accepted
	}{
		{"slash", Options{Cwd: "/"}, []string{"workspace (Options.Cwd) /", "root of a file system", "Options.Cwd DIR", "Options.Mode read-only"}},
		{"symlink to slash", Options{Cwd: link}, []string{link + " (/)", "root of a file system"}},
		{"home", Options{Cwd: home}, []string{home, "your home directory ($HOME)"}},
		{"account home", Options{Cwd: account}, []string{account, "your home directory"}},
		{"above home", Options{Cwd: filepath.Dir(home)}, []string{"contains your home directory"}},
		{"usr", Options{Cwd: "/usr"}, []string{"/usr", "system directory"}},
		{"add-dir home", Options{Cwd: fine, AddDirs: []string{home}}, []string{"Options.AddDirs " + home, "subdirectory"}},
		{"add-dir etc", Options{Cwd: fine, AddDirs: []string{"/etc"}}, []string{"Options.AddDirs /etc", "system directory"}},
		{"add-dir tmp", Options{Cwd: fine, AddDirs: []string{"/tmp"}}, []string{"Options.AddDirs /tmp", "share_slash_tmp = true"}},
		{"writable_roots", Options{Cwd: fine, Config: &Config{Path: "c.toml", SandboxWorkspaceWrite: WorkspaceWriteSection{WritableRoots: []string{"/opt"}}}},
			[]string{"writable_roots in c.toml /opt", "system directory"}},
		{"subdirectory of home", Options{Cwd: sub}, nil},
		{"under /var/tmp", Options{Cwd: fine}, nil},
		{"read-only at slash", Options{Cwd: "/", Mode: ReadOnly}, nil},
		{"danger at slash", Options{Cwd: "/", Mode: DangerFullAccess}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := resolveEnv(c.o, getenv, "linux")
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want a refusal")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestResolveRefusesTempThatConfinesNothing: a $TMPDIR that is the home
// is refused whether /tmp is shared or private; /tmp itself, agentbox's
// own temp root, is not.
func TestResolveRefusesTempThatConfinesNothing(t *testing.T) {
	home, ws := outsideTmp(t), outsideTmp(t)
	for _, share := range []bool{false, true} {
		cfg := &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ShareSlashTmp: ptr(share)}}
		env := map[string]string{"HOME": home, "TMPDIR": home}
		_, err := resolveEnv(Options{Cwd: ws, Config: cfg}, func(k string) string { return env[k] }, "linux")
		if err == nil || !strings.Contains(err.Error(), "$TMPDIR "+home) || !strings.Contains(err.Error(), "exclude_tmpdir_env_var") {
			t.Errorf("share=%v, TMPDIR=$HOME: %v, want a refusal naming $TMPDIR and the fix", share, err)
		}
		env["TMPDIR"] = "/tmp"
		if _, err := resolveEnv(Options{Cwd: ws, Config: cfg}, func(k string) string { return env[k] }, "linux"); err != nil {
			t.Errorf("share=%v, TMPDIR=/tmp: %v", share, err)
		}
	}
}
