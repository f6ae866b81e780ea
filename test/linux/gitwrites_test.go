//go:build linux

package linux

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo makes a real repository with one commit, owned by u.
func gitRepo(t *testing.T, fx *fixture) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	repo := filepath.Join(fx.dir, "repo")
	writeFile(t, filepath.Join(repo, "f.txt"), "one\n")
	chownR(t, fx.dir, fx.u)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", "."},
		{"config", "user.email", "t@example.com"},
		{"config", "user.name", "t"},
		{"add", "f.txt"},
		{"commit", "-qm", "one"},
	} {
		if r := host(t, fx.u, runOpts{dir: repo, env: fx.env()}, "git", args...); r.code != 0 {
			t.Fatalf("host git %v: %v", args, r)
		}
	}
	return repo
}

// TestGitWrites: with allow_git_writes, add, commit, checkout -b and stash
// work; planting hooks, editing or creating config, config.worktree,
// commondir and alternates, and renaming hooks/, config or .git aside all
// fail. Without it nothing in .git changes.
func TestGitWrites(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		gitdir := filepath.Join(repo, ".git")
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		chownR(t, fx.dir, u)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}

		// Off (the default): .git stays read-only as a whole.
		before := snapshot(t, gitdir)
		r := runWith(t, u, o, "run", "-C", repo, "--", "/bin/sh", "-c", `echo two >> f.txt; git add f.txt && echo ADDED; git commit -qam two && echo COMMITTED; true`)
		if strings.Contains(r.stdout, "ADDED") || strings.Contains(r.stdout, "COMMITTED") {
			t.Errorf("without allow_git_writes git wrote .git: %v", r)
		}
		if d := diffSnapshots(before, snapshot(t, gitdir), nil); len(d) > 0 {
			t.Errorf(".git changed without allow_git_writes:\n%s", strings.Join(d, "\n"))
		}

		// On: the everyday commands work.
		r = runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", `set -e
echo two > f.txt
git add f.txt
git commit -qm two
git checkout -qb feat
echo three > f.txt
git stash -q
git stash list | grep -q stash@
git stash pop -q
git commit -qam three
git checkout -q main
git merge -q --ff-only feat
echo GIT-OK`)
		if r.code != 0 || !strings.Contains(r.stdout, "GIT-OK") {
			t.Fatalf("git with allow_git_writes failed: %v", r)
		}
		if h := host(t, u, o, "git", "log", "--format=%s", "main"); h.code != 0 || h.stdout != "three\ntwo\none\n" {
			t.Errorf("host sees log %q, want three, two, one: %v", h.stdout, h)
		}

		// And the attacks fail.
		before = snapshot(t, gitdir)
		attacks := map[string]string{
			"HOOK":       `printf '#!/bin/sh\necho pwned\n' > .git/hooks/pre-commit`,
			"HOOK-CHMOD": `chmod +x .git/hooks/*.sample`,
			"CONFIG":     `printf '[core]\n\thooksPath = /tmp\n' >> .git/config`,
			"GITCONFIG":  `git config core.fsmonitor "sh -c 'echo pwned'"`,
			"CWT":        `echo '[core]' > .git/config.worktree`,
			"COMMONDIR":  `echo /tmp/evil > .git/commondir`,
			"ALTERNATES": `echo /tmp/evil/objects > .git/objects/info/alternates`,
			"INFO":       `echo '* filter=evil' > .git/info/attributes`,
			"MV-HOOKS":   `mv .git/hooks .git/hooks.old`,
			"MV-CONFIG":  `mv .git/config .git/config.old`,
			"RM-CONFIG":  `rm -f .git/config && test ! -e .git/config`,
			"MV-GIT":     `mv .git .git.old`,
			"MV-OBJECTS": `mv .git/objects .git/objects.old`,
			"MV-INFO":    `mv .git/objects/info .git/objects/info.old`,
			"MODULES":    `mkdir -p .git/modules/evil`,
			"WORKTREES":  `mkdir -p .git/worktrees/evil`,
			"LN-CW":      `ln -s /tmp/evil .git/config.worktree`,
		}
		var script strings.Builder
		for name, cmd := range attacks {
			script.WriteString("(" + cmd + ") 2>/dev/null && echo BREACH-" + name + "\n")
		}
		script.WriteString("echo DONE\n")
		r = runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script.String())
		if !strings.Contains(r.stdout, "DONE") {
			t.Fatalf("attack script did not run: %v", r)
		}
		if strings.Contains(r.stdout, "BREACH-") {
			t.Errorf("attacks succeeded: %q", r.stdout)
		}
		if d := diffSnapshots(before, snapshot(t, gitdir), nil); len(d) > 0 {
			t.Errorf(".git changed by the attacks (placeholders must be gone too):\n%s", strings.Join(d, "\n"))
		}
		for _, p := range []string{"config.worktree", "commondir", "modules", "worktrees", "objects/info/alternates"} {
			assertAbsent(t, filepath.Join(gitdir, p))
		}
		if _, err := os.Stat(filepath.Join(gitdir, "hooks")); err != nil {
			t.Errorf("hooks: %v", err)
		}
	})
}

// TestGitWritesPlantedSubmodule: with allow_git_writes the command can
// write the index, so it can add a gitlink (a submodule entry) at a
// directory where it made a repository of its own. The user's next plain
// `git status` at the top then recurses into that repository and runs its
// core.fsmonitor on the host. agentbox must leave no such repository
// behind for git to find.
func TestGitWritesPlantedSubmodule(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		chownR(t, fx.dir, u)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		marker := filepath.Join(fx.dir, "PWNED")
		// A repository of the user's own below the top, there before
		// the run and left alone by it, stays.
		if r := host(t, u, o, "git", "init", "-q", "mine"); r.code != 0 {
			t.Fatalf("git init mine: %v", r)
		}
		// A repository made in the same clock tick as a run's start
		// counts as the run's (the check rounds the start down to the
		// file system's time step, so a plant cannot hide in that tick):
		// let the user's be older than that.
		time.Sleep(50 * time.Millisecond)
		for _, variant := range []string{"dir", "file", "commit", "branch", "replace", "rewrite", "unreadable"} {
			sub := "sub-" + variant
			if variant == "unreadable" {
				// Below a directory the command leaves without read
				// permission: git, as the same user, still reaches
				// locked/sub-unreadable/.git by path.
				sub = "locked/" + sub
			}
			plant := `git init -q ` + sub + ` && git -C ` + sub + ` -c user.email=a@b -c user.name=a commit -q --allow-empty -m s`
			switch variant {
			case "rewrite":
				// The user's nested repository, kept, with its
				// config rewritten in place.
				for _, args := range [][]string{{"init", "-q", sub}, {"-C", sub, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "s"}} {
					if r := host(t, u, o, "git", args...); r.code != 0 {
						t.Fatalf("git %v: %v", args, r)
					}
				}
				plant = "git checkout -qb feat-" + sub + " && true"
			case "replace":
				// The user's nested repository, replaced by the
				// command's (its inode number may well be reused).
				if r := host(t, u, o, "git", "init", "-q", sub); r.code != 0 {
					t.Fatalf("git init %s: %v", sub, r)
				}
				plant = "rm -rf " + sub + "/.git && " + plant
				fallthrough
			case "branch", "unreadable":
				// Nothing in the index at the end: the gitlink waits in
				// a branch for the user to merge.
				plant = "git checkout -qb feat-" + filepath.Base(sub) + " && mkdir -p " + filepath.Dir(sub) + " && " + plant
			case "file":
				// A .git file naming a gitdir the command made elsewhere.
				plant = `git init -q --separate-git-dir=.hidden-` + sub + ` ` + sub + ` && git -C ` + sub + ` -c user.email=a@b -c user.name=a commit -q --allow-empty -m s`
			}
			script := `set -e
` + plant + `
git -C ` + sub + ` config core.fsmonitor "touch ` + marker + `; false"
git update-index --add --cacheinfo 160000,$(git -C ` + sub + ` rev-parse HEAD),` + sub + `
`
			switch variant {
			case "commit":
				script += "git commit -qm sub\n"
			case "branch", "replace", "rewrite", "unreadable":
				script += "git commit -qm sub && git rm -q --cached " + sub + " && git checkout -q main\n"
			}
			if variant == "unreadable" {
				script += "chmod 311 locked\n"
			}
			script += "echo PLANTED\n"
			r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script)
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("%s: the plant did not run (the attack needs a writable index): %v", variant, r)
			}
			if strings.Contains(r.stderr, "/mine") {
				t.Errorf("%s: the run named the user's own repository: %s", variant, r.stderr)
			}
			if !strings.Contains(r.stderr, sub) || !strings.Contains(r.stderr, "moved the git repository") {
				t.Errorf("%s: no message names the planted submodule moved aside: %v", variant, r)
			}
			steps := [][]string{{"status"}, {"diff", "HEAD"}, {"commit", "-qam", "x", "--allow-empty"}}
			if variant == "branch" || variant == "replace" || variant == "rewrite" || variant == "unreadable" {
				steps = append([][]string{{"merge", "-q", "feat-" + filepath.Base(sub)}}, steps...)
			}
			for _, args := range steps {
				host(t, u, o, "git", args...)
				if exists(marker) {
					t.Fatalf("%s: host git %v ran the planted submodule's core.fsmonitor", variant, args)
				}
			}
		}
		// A gitlink at a symlink to the user's repository: git refuses
		// it, and agentbox must not rename the .git it leads to.
		r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c",
			"ln -s mine sub-link && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub-link && echo PLANTED")
		if !strings.Contains(r.stdout, "PLANTED") {
			t.Fatalf("symlink: the plant did not run: %v", r)
		}
		if !exists(filepath.Join(repo, "mine", ".git", "HEAD")) {
			t.Errorf("the user's own nested repository was moved aside (symlink run: %v)", r)
		}
	})
}

// TestGitWritesSymlinksOut: git writes through symlinks in .git (it
// appends reflogs to logs/HEAD and rewrites COMMIT_EDITMSG and FETCH_HEAD
// in place). A command that points them outside the writable roots would
// have the user's next checkout append a branch name it chose, such as
// "x;echo${IFS}PWNED;", to ~/.bashrc. None of them may be left.
func TestGitWritesSymlinksOut(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		outside := map[string]string{}
		for _, name := range []string{"logs/HEAD", "COMMIT_EDITMSG", "FETCH_HEAD", "logs/refs/heads/main", "refs/tags"} {
			outside[name] = filepath.Join(fx.dir, "outside-"+strings.ReplaceAll(name, "/", "-"))
			if name == "refs/tags" {
				if err := os.MkdirAll(outside[name], 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			writeFile(t, outside[name], "orig\n")
		}
		chownR(t, fx.dir, u)
		before := snapshot(t, outside["refs/tags"])
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		script := "set -e\ngit branch 'x;echo${IFS}PWNED;'\n" +
			"git checkout -q 'x;echo${IFS}PWNED;'\n" +
			"rm -rf .git/refs/tags && ln -s " + outside["refs/tags"] + " .git/refs/tags\n" +
			"mkfifo .git/MERGE_MSG\n"
		for _, name := range []string{"logs/HEAD", "COMMIT_EDITMSG", "FETCH_HEAD", "logs/refs/heads/main"} {
			script += "ln -sf " + outside[name] + " .git/" + name + "\n"
		}
		// Directories the command makes read-only, so that removing
		// the links needs write permission the guard must restore.
		script += "chmod 0555 .git/logs/refs/heads .git/logs .git/refs\n"
		script += "echo PLANTED\n"
		r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script)
		if !strings.Contains(r.stdout, "PLANTED") {
			t.Fatalf("the plant did not run: %v", r)
		}
		if r.code != 0 {
			t.Errorf("the run failed: %v", r)
		}
		// The user carries on: back to main, a commit, a fetch.
		for _, args := range [][]string{{"checkout", "-q", "main"}, {"commit", "-q", "--allow-empty", "-m", "next"}, {"fetch", "-q", ".", "main"}, {"tag", "v1"}} {
			if r := host(t, u, o, "git", args...); r.code != 0 {
				t.Errorf("host git %v: %v", args, r)
			}
		}
		for name, p := range outside {
			if name == "refs/tags" {
				if d := diffSnapshots(before, snapshot(t, p), nil); len(d) > 0 {
					t.Errorf("host git wrote refs outside the repository (%s): %v", p, d)
				}
				continue
			}
			assertContent(t, p, "orig\n")
		}
	})
}

// TestGitWritesReplaceRefs: git shows and checks out a replaced object's
// replacement (git-replace(1)). A command could commit "evil", replace
// that commit with a benign one, and have the user review and merge the
// benign one while the branch (and what git push sends) is "evil". Replace
// refs the command made, loose or packed, must not be left.
func TestGitWritesReplaceRefs(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		chownR(t, fx.dir, u)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		for _, variant := range []string{"loose", "packed"} {
			br := "feat-" + variant
			script := `set -e
git checkout -qb ` + br + `
echo benign-` + variant + ` > f.txt && git commit -qam benign && good=$(git rev-parse HEAD)
git reset -q --hard HEAD~1
echo evil-` + variant + ` > f.txt && git commit -qam evil
git replace HEAD $good
git checkout -qf main
`
			if variant == "packed" {
				script += "git pack-refs --all\n"
			}
			script += "echo PLANTED\n"
			r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script)
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("%s: the plant did not run: %v", variant, r)
			}
			if h := host(t, u, o, "git", "show", br+":f.txt"); h.stdout != "evil-"+variant+"\n" {
				t.Errorf("%s: host git shows %s:f.txt as %q, but the branch holds evil-%s: a replace ref is left: %v", variant, br, h.stdout, variant, h)
			}
		}
	})
}

// TestGitWritesRebaseTodo: a rebase the command leaves interrupted holds a
// todo list it wrote; the user's git rebase --continue runs its exec
// lines on the host. The state must be moved aside.
func TestGitWritesRebaseTodo(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		chownR(t, fx.dir, u)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		marker := filepath.Join(fx.dir, "PWNED")
		script := `set -e
GIT_SEQUENCE_EDITOR="printf 'break\nexec touch ` + marker + `\n' >" git rebase -q -i --root
test -d .git/rebase-merge
echo PLANTED`
		r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script)
		if !strings.Contains(r.stdout, "PLANTED") {
			t.Fatalf("the plant did not run: %v", r)
		}
		host(t, u, o, "git", "rebase", "--continue")
		if exists(marker) {
			t.Fatalf("host git rebase --continue ran the command's exec line")
		}
		if !strings.Contains(r.stderr, "/.git/rebase-merge; moved it to ") || !strings.Contains(r.stderr, "/quarantine/") {
			t.Errorf("no message names the moved rebase state: %v", r)
		}
	})
}

// TestGitWritesIndexPaths: git does not check the paths of an index it
// reads, and `git checkout .`, `git restore .` and `git checkout-index -a`
// write each entry: an entry "../bashrc" that the command put in the
// index lands outside the worktree. Such an index must not be left.
func TestGitWritesIndexPaths(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		content := "echo PWNED\n"
		sum := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(content), content)))
		var body []byte
		body = append(body, "DIRC\x00\x00\x00\x02\x00\x00\x00\x02"...)
		for _, p := range []string{"../bashrc", "f.txt"} {
			e := make([]byte, 40)
			binary.BigEndian.PutUint32(e[24:], 0o100644)
			binary.BigEndian.PutUint32(e[36:], uint32(len(content)))
			e = append(e, sum[:]...)
			e = binary.BigEndian.AppendUint16(e, uint16(len(p)))
			e = append(e, p...)
			e = append(e, make([]byte, 8-len(e)%8)...)
			body = append(body, e...)
		}
		ck := sha1.Sum(body)
		writeFile(t, filepath.Join(fx.dir, "evil-index"), string(append(body, ck[:]...)))
		chownR(t, fx.dir, u)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		target := filepath.Join(fx.dir, "bashrc")
		script := "set -e\nprintf 'echo PWNED\\n' | git hash-object -w --stdin >/dev/null\ncp " + filepath.Join(fx.dir, "evil-index") + " .git/index\ngit ls-files | grep -q '^../bashrc$'\necho PLANTED\n"
		for _, args := range [][]string{{"checkout", "."}, {"restore", "."}, {"checkout-index", "-a", "-f"}} {
			r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script)
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("the plant did not run: %v", r)
			}
			host(t, u, o, "git", args...)
			if exists(target) {
				t.Fatalf("host git %v wrote %s, outside the worktree, from the command's index", args, target)
			}
		}
	})
}

// TestGitWritesForgedIndex: git trusts an index entry whose recorded stat
// data matches the file, without reading it. A command that can write the
// index can rewrite a tracked file and record its new stat data beside the
// old object id, or mark it assume-unchanged or skip-worktree: the user's
// git status and git diff then show nothing while the file is the
// command's. After the run git must see the change.
func TestGitWritesForgedIndex(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		forge := filepath.Join(fx.dir, "forge.py")
		// Copies f.txt's stat data into its (first) index entry; git keeps
		// the old object id. Version 2 index, SHA-1.
		writeFile(t, forge, `import hashlib, os, struct
d = bytearray(open(".git/index", "rb").read())
st = os.stat("f.txt")
struct.pack_into(">6I", d, 12, int(st.st_ctime), st.st_ctime_ns % 10**9, int(st.st_mtime), st.st_mtime_ns % 10**9, st.st_dev & 0xffffffff, st.st_ino & 0xffffffff)
struct.pack_into(">I", d, 12 + 36, st.st_size)
body = bytes(d[:-20])
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
`)
		chownR(t, fx.dir, u)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		for _, variant := range []string{"stat", "assume-unchanged", "skip-worktree"} {
			// Same length as "one\n", so only the content differs;
			// the sleep takes the file out of git's racy window.
			script := "set -e\nprintf 'PWN\\n' > f.txt\nsleep 1.2\n"
			switch variant {
			case "stat":
				script += python + " " + forge + "\n"
			default:
				script += "git update-index --" + variant + " f.txt\n"
			}
			// Placeholders are empty directories, which git does not
			// list.
			script += "test -z \"$(git status --porcelain)\"\necho PLANTED\n"
			r := runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--", "/bin/sh", "-c", script)
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("%s: the plant did not run (git status inside must show nothing): %v", variant, r)
			}
			if h := host(t, u, o, "git", "status", "--porcelain"); !strings.Contains(h.stdout, "f.txt") {
				t.Errorf("%s: host git status does not show the command's change to f.txt: %v", variant, h)
			}
			// A forged stat is made untrusted (the diff shows the new
			// content); a hiding flag gets the index moved aside (git
			// then shows f.txt deleted from the index and untracked).
			want := "+PWN"
			if variant != "stat" {
				want = "f.txt"
			}
			if h := host(t, u, o, "git", "diff", "HEAD"); !strings.Contains(h.stdout, want) {
				t.Errorf("%s: host git diff HEAD does not show the command's change to f.txt: %v", variant, h)
			}
			// Back to a clean tree for the next variant.
			for _, args := range [][]string{{"reset", "-q"}, {"update-index", "--no-assume-unchanged", "--no-skip-worktree", "f.txt"}, {"checkout", "-q", "f.txt"}} {
				host(t, u, o, "git", args...)
			}
		}
	})
}
