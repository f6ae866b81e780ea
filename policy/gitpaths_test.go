package policy

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeIndex writes a version 2 git index holding the given paths; those
// ending in "@" (the marker is dropped) are gitlinks.
func writeIndex(t *testing.T, path string, names ...string) {
	t.Helper()
	var b []byte
	b = append(b, "DIRC"...)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint32(b, uint32(len(names)))
	for _, n := range names {
		mode := uint32(0o100644)
		if name, ok := strings.CutSuffix(n, "@"); ok {
			n, mode = name, 0o160000
		}
		e := make([]byte, 62)
		binary.BigEndian.PutUint32(e[24:], mode)
		binary.BigEndian.PutUint16(e[60:], uint16(len(n)))
		e = append(e, n...)
		for pad := 8 - (62+len(n))%8; pad > 0; pad-- {
			e = append(e, 0)
		}
		b = append(b, e...)
	}
	b = append(b, make([]byte, 20)...) // checksum, not checked
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addHEAD(t, path)
}

// addHEAD gives the gitdir a file in lies in a HEAD, which makes it a
// repository for discovery, unless it has one.
func addHEAD(t *testing.T, path string) {
	t.Helper()
	dir := filepath.Dir(path)
	if filepath.Base(dir) != ".git" && filepath.Base(filepath.Dir(dir)) != "modules" {
		return
	}
	if _, err := os.Lstat(filepath.Join(dir, "HEAD")); err == nil {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	addHEAD(t, path)
}

// resolveIn resolves a workspace-write policy for ws with env as the
// environment and /tmp excluded.
func resolveIn(t *testing.T, ws string, env map[string]string) (*Policy, error) {
	t.Helper()
	return resolveEnv(Options{Cwd: ws,
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, func(k string) string { return env[k] }, "linux")
}

// protectIn is the policy's protections for the single writable root
// root, with the environment env: for a root Resolve now refuses (the
// home directory), whose protections still matter wherever the
// configuration git reads lies in a root ($XDG_CONFIG_HOME,
// GIT_CONFIG_GLOBAL).
func protectIn(t *testing.T, root string, env map[string]string) (*Policy, error) {
	t.Helper()
	prot, err := protectedPaths([]string{root}, DefaultProtectedNames(), nil, nil, func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	return &Policy{f: fields{Mode: WorkspaceWrite, Cwd: root, WritableRoots: []string{root}, Protected: prot}}, nil
}

func wantProtected(t *testing.T, p *Policy, path string, kind ProtectedKind) {
	t.Helper()
	pr, ok := findProtected(p, path)
	if !ok {
		var got []string
		for _, pr := range p.Protected() {
			got = append(got, pr.Path+" ("+pr.Why+")")
		}
		t.Errorf("%s not protected; protected: %s", path, strings.Join(got, ", "))
		return
	}
	if pr.Kind != kind {
		t.Errorf("%s protected as %v, want %v", path, pr.Kind, kind)
	}
}

func notProtected(t *testing.T, p *Policy, path string) {
	t.Helper()
	if pr, ok := findProtected(p, path); ok {
		t.Errorf("%s protected (%s), want not", path, pr.Why)
	}
}

// Submodules come from the index's gitlinks, never from .gitmodules (which
// the command can edit): finding 4 of issue 9.
func TestSubmodulesFromIndex(t *testing.T) {
	ws := realTemp(t)
	writeIndex(t, filepath.Join(ws, ".git", "index"), "a.txt", "lib@", "vendor/x@", "../escape@", "sub/.git/y@", "zz")
	write(t, filepath.Join(ws, "lib", ".git"), "gitdir: ../.git/modules/lib\n")
	mkdirs(t, filepath.Join(ws, ".git", "modules", "lib"), filepath.Join(ws, "lib", "deep"))
	writeIndex(t, filepath.Join(ws, ".git", "modules", "lib", "index"), "deep@")
	// .gitmodules names another path, in a form the old parser missed;
	// it must not matter either way.
	write(t, filepath.Join(ws, ".gitmodules"), "[submodule \"o\"] PATH = other\n")
	mkdirs(t, filepath.Join(ws, "other"))
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(ws, "lib", ".git"), File)
	wantProtected(t, p, filepath.Join(ws, "lib", "deep", ".git"), Missing)
	wantProtected(t, p, filepath.Join(ws, "vendor"), Missing) // firstMissing of vendor/x/.git
	notProtected(t, p, filepath.Join(ws, "other", ".git"))
	for _, pr := range p.Protected() {
		if strings.Contains(pr.Path, "escape") || strings.Contains(pr.Path, "sub") {
			t.Errorf("unsafe index path followed: %s", pr.Path)
		}
	}
}

// A submodule path the command turned into a symlink loop, or a link out
// of the roots, must not make every later run fail (the near miss of
// issue 9).
func TestSubmoduleThroughSymlinkNoDenial(t *testing.T) {
	ws := realTemp(t)
	out := realTemp(t)
	writeIndex(t, filepath.Join(ws, ".git", "index"), "loop@", "away@", "dangling@", "inner@")
	os.Symlink("loop", filepath.Join(ws, "loop"))
	os.Symlink(out, filepath.Join(ws, "away"))
	os.Symlink("/nonexistent/x", filepath.Join(ws, "dangling"))
	mkdirs(t, filepath.Join(ws, "real"))
	os.Symlink("real", filepath.Join(ws, "inner"))
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatalf("a symlinked submodule path fails the run: %v", err)
	}
	for _, pr := range p.Protected() {
		if pr.Root != "" && strings.Contains(pr.Path[len(pr.Root):], "/loop/") {
			t.Errorf("protected path through a symlink: %s", pr.Path)
		}
	}
	wantProtected(t, p, filepath.Join(ws, "inner"), Symlink)
	wantProtected(t, p, filepath.Join(ws, "real", ".git"), Missing)
	wantProtected(t, p, filepath.Join(ws, "away"), Symlink)
}

// Finding 5 and the rule: paths git config names inside a root.
func TestGitConfigPathsProtected(t *testing.T) {
	ws := realTemp(t)
	home := realTemp(t)
	write(t, filepath.Join(ws, ".git", "config"), `[core]
	repositoryformatversion = 0
[core] hooksPath = .husky
[include]
	path = ../inc.cfg
[includeIf "gitdir:/nowhere/"]
	path = `+filepath.Join(ws, "cond.cfg")+`
[alias]
	st = status
	x = "!./tools/x.sh --flag"
[filter "lfs"]
	clean = git-lfs clean -- %f
	smudge = sh scripts/smudge.sh
[pager]
	log = false
	diff = ./pager.sh
[diff "bin"]
	textconv = `+filepath.Join(ws, "conv")+`
`)
	write(t, filepath.Join(ws, "inc.cfg"), "[core]\n\tfsmonitor = ./fsm.sh\n")
	write(t, filepath.Join(ws, "scripts", "smudge.sh"), "")
	write(t, filepath.Join(home, ".gitconfig"), "[core]\n\tpager = ~/bin/pager\n\texcludesFile = .myignore\n[credential]\n\thelper = !"+filepath.Join(ws, "cred")+" get\n")
	p, err := resolveIn(t, ws, map[string]string{"HOME": home})
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(ws, ".husky"), Missing)
	wantProtected(t, p, filepath.Join(ws, "inc.cfg"), File)
	wantProtected(t, p, filepath.Join(ws, "cond.cfg"), Missing)
	wantProtected(t, p, filepath.Join(ws, "fsm.sh"), Missing)
	wantProtected(t, p, filepath.Join(ws, "tools"), Missing)
	wantProtected(t, p, filepath.Join(ws, "scripts", "smudge.sh"), File)
	wantProtected(t, p, filepath.Join(ws, "pager.sh"), Missing)
	wantProtected(t, p, filepath.Join(ws, "conv"), Missing)
	wantProtected(t, p, filepath.Join(ws, ".myignore"), Missing)
	wantProtected(t, p, filepath.Join(ws, "cred"), Missing)
	notProtected(t, p, filepath.Join(ws, "git-lfs"))
	notProtected(t, p, filepath.Join(ws, "%f"))
	notProtected(t, p, filepath.Join(ws, "status"))
}

// The rarer keys that name programs: git-archive's tar filters, imap-send's
// tunnel, git gui tools, instaweb, git svn and Git LFS's transfer agents
// and extensions.
func TestGitConfigRareProgramKeys(t *testing.T) {
	ws := realTemp(t)
	write(t, filepath.Join(ws, ".git", "config"), `[tar "tgz"]
	command = ./tar.sh
[imap]
	tunnel = ./tunnel.sh
[guitool "x"]
	cmd = ./gui.sh
[instaweb]
	httpd = ./httpd.sh
[svn]
	authorsProg = ./authors.sh
[lfs "customtransfer.agent"]
	path = ./lfsagent
[lfs "extension.ext"]
	clean = ./lfsclean %f
	smudge = ./lfssmudge %f
`)
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tar.sh", "tunnel.sh", "gui.sh", "httpd.sh", "authors.sh", "lfsagent", "lfsclean", "lfssmudge"} {
		wantProtected(t, p, filepath.Join(ws, name), Missing)
	}
}

// With a writable root at $HOME (Resolve refuses one; see protectIn), the
// global config itself (missing or not) and git's XDG directory are
// protected.
func TestGlobalGitConfigInRoot(t *testing.T) {
	home := realTemp(t)
	mkdirs(t, filepath.Join(home, ".config"))
	write(t, filepath.Join(home, ".gitconfig"), "[include]\n\tpath = ~/.gitconfig.local\n[core]\n\thooksPath = ~/hooks\n")
	p, err := protectIn(t, home, map[string]string{"HOME": home})
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(home, ".gitconfig"), File)
	wantProtected(t, p, filepath.Join(home, ".gitconfig.local"), Missing)
	wantProtected(t, p, filepath.Join(home, ".config", "git"), Missing)
	wantProtected(t, p, filepath.Join(home, "hooks"), Missing)
}

// Missing paths git reads as files (config files, includes, ignore and
// attributes files) are marked so a backend puts an empty file there, not
// a directory git would choke on; hooks and programs are not.
func TestGitConfigMissingFiles(t *testing.T) {
	home := realTemp(t)
	write(t, filepath.Join(home, ".config", "git", "keep"), "")
	write(t, filepath.Join(home, ".git", "config"), "[include]\n\tpath = ~/local.cfg\n[core]\n\texcludesFile = ignore\n\thooksPath = hooks\n\tpager = ./pager.sh\n")
	p, err := protectIn(t, home, map[string]string{"HOME": home})
	if err != nil {
		t.Fatal(err)
	}
	for path, file := range map[string]bool{
		".gitconfig": true, "local.cfg": true, "ignore": true,
		"hooks": false, "pager.sh": false, ".codex": false,
	} {
		pr, ok := findProtected(p, filepath.Join(home, path))
		if !ok || pr.Kind != Missing {
			t.Errorf("%s: protected %v as %v, want missing", path, ok, pr.Kind)
			continue
		}
		if pr.FileWhenMissing != file {
			t.Errorf("%s: FileWhenMissing = %v, want %v", path, pr.FileWhenMissing, file)
		}
	}
}

// Another run's placeholder for the missing ~/.gitconfig (an empty
// directory) while this run resolves its policy: no config, no error, and
// the directory is held like any protected one.
func TestGlobalGitConfigPlaceholder(t *testing.T) {
	home := realTemp(t)
	mkdirs(t, filepath.Join(home, ".gitconfig"))
	p, err := protectIn(t, home, map[string]string{"HOME": home})
	if err != nil {
		t.Fatalf("a placeholder at ~/.gitconfig fails the run: %v", err)
	}
	wantProtected(t, p, filepath.Join(home, ".gitconfig"), Dir)
}

// A workspace below the repository's top (no .git of its own): the
// enclosing repository's config and submodules still count.
func TestGitConfigOfEnclosingRepo(t *testing.T) {
	top := realTemp(t)
	ws := filepath.Join(top, "pkg")
	mkdirs(t, ws)
	write(t, filepath.Join(top, ".git", "config"), "[core]\n\thooksPath = pkg/hooks\n")
	writeIndex(t, filepath.Join(top, ".git", "index"), "pkg/lib@")
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(ws, "hooks"), Missing)
	wantProtected(t, p, filepath.Join(ws, "lib"), Missing)
	wantProtected(t, p, filepath.Join(ws, "HEAD"), Missing)
}

// A hooksPath that is the workspace itself protects the hooks in it, not
// the whole workspace; a config the command may have planted (a repository
// above the workspace, inside another root) that git cannot parse is
// skipped (git refuses it too) rather than failing every later run; one
// outside every root is an error naming the file.
func TestGitConfigRootsAndErrors(t *testing.T) {
	ws := realTemp(t)
	write(t, filepath.Join(ws, ".git", "config"), "[core]\n\thooksPath = .\n")
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(ws, "pre-commit"), Missing)
	notProtected(t, p, ws)

	outer := realTemp(t)
	inner := filepath.Join(outer, "x", "ws")
	mkdirs(t, inner)
	write(t, filepath.Join(outer, "x", ".git", "config"), "[core]\n\thooksPath = \"x\n")
	write(t, filepath.Join(outer, "x", ".git", "index"), "DIRC garbage")
	p, err = resolveEnv(Options{Cwd: inner, AddDirs: []string{outer},
		Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ExcludeSlashTmp: ptr(true)}}}, noEnv, "linux")
	if err != nil {
		t.Fatalf("a planted unparsable config fails the run: %v", err)
	}
	wantProtected(t, p, filepath.Join(outer, "x", ".git"), Dir)

	// The user's own files outside every root: errors naming the file.
	ws2 := realTemp(t)
	other := realTemp(t)
	write(t, filepath.Join(other, ".git", "index"), "DIRC garbage")
	write(t, filepath.Join(ws2, ".git"), "gitdir: "+filepath.Join(other, ".git")+"\n")
	if _, err := resolveIn(t, ws2, nil); err == nil || !strings.Contains(err.Error(), filepath.Join(other, ".git", "index")) {
		t.Errorf("corrupt index outside the roots: %v", err)
	}
	home := realTemp(t)
	write(t, filepath.Join(home, ".gitconfig"), "[core]\n\tpager = \"x\n")
	if _, err := resolveIn(t, ws, map[string]string{"HOME": home}); err == nil || !strings.Contains(err.Error(), filepath.Join(home, ".gitconfig")) {
		t.Errorf("unparsable global config: %v", err)
	}
}

// husky 9: core.hooksPath = .husky/_, whose generated hooks run the
// scripts in .husky/; a hooksPath through a symlink protects the link and
// its target.
func TestHooksPathHuskyAndLinks(t *testing.T) {
	ws := realTemp(t)
	mkdirs(t, filepath.Join(ws, ".husky", "_"), filepath.Join(ws, "real-hooks"))
	os.Symlink("real-hooks", filepath.Join(ws, "hooks-link"))
	write(t, filepath.Join(ws, ".git", "config"), "[core]\n\thooksPath = .husky/_\n[core \"x\"]\n[core]\n\tHOOKSPATH = hooks-link\n")
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(ws, ".husky", "_"), Dir)
	wantProtected(t, p, filepath.Join(ws, ".husky"), Dir)
	wantProtected(t, p, filepath.Join(ws, "hooks-link"), Symlink)
	wantProtected(t, p, filepath.Join(ws, "real-hooks"), Dir)
}

// An empty .git (a concurrent run's placeholder) in the workspace does not
// hide the enclosing repository, as it does not for git.
func TestPlaceholderGitDoesNotHideEnclosingRepo(t *testing.T) {
	top := realTemp(t)
	ws := filepath.Join(top, "pkg")
	mkdirs(t, filepath.Join(ws, ".git"))
	write(t, filepath.Join(top, ".git", "config"), "[core]\n\thooksPath = pkg/hooks\n")
	p, err := resolveIn(t, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantProtected(t, p, filepath.Join(ws, "hooks"), Missing)
}
