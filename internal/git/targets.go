package git

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
)

// Users review what an agent did by running git on the host afterwards.
// The rule this file enforces: no git command run there executes or trusts
// anything the sandbox wrote. .git itself is a protected name; beyond it,
// git runs or trusts paths that its configuration names, and a
// superproject trusts each submodule's .git file. [Targets] finds those
// paths so that the policy can protect them like .git, missing or not.
//
// It reads only what the command cannot write (the repository's config and
// index inside the read-only .git, and the user's global and system config
// outside, or protected inside, every writable root), starts no git
// process, and costs a few small reads per run.

// Target is one path git would run or trust.
type Target struct {
	Path string
	// Why names the configuration or repository that makes git use it,
	// for messages.
	Why string
	// File: git reads it as a file (a missing one is then held as a
	// file, not a directory).
	File bool
}

// gitRunKeys are the variables whose value is a command git runs (through
// the shell when it has shell syntax), listed from git-config(1) and
// githooks(5). "*" stands for any subsection. pager.* and alias.* are
// handled separately: only non-boolean pager values and "!" aliases run.
var gitRunKeys = map[string]bool{
	"core.fsmonitor":             true, // a hook path unless boolean
	"core.pager":                 true,
	"core.editor":                true,
	"core.sshcommand":            true,
	"core.askpass":               true,
	"core.gitproxy":              true,
	"core.alternaterefscommand":  true,
	"sequence.editor":            true,
	"diff.external":              true,
	"diff.*.command":             true,
	"diff.*.textconv":            true,
	"merge.*.driver":             true,
	"mergetool.*.cmd":            true,
	"mergetool.*.path":           true,
	"difftool.*.cmd":             true,
	"difftool.*.path":            true,
	"filter.*.clean":             true,
	"filter.*.smudge":            true,
	"filter.*.process":           true,
	"credential.helper":          true,
	"credential.*.helper":        true,
	"gpg.program":                true,
	"gpg.*.program":              true,
	"gpg.ssh.defaultkeycommand":  true,
	"interactive.difffilter":     true,
	"browser.*.cmd":              true,
	"browser.*.path":             true,
	"man.*.cmd":                  true,
	"man.*.path":                 true,
	"sendemail.sendmailcmd":      true,
	"sendemail.smtpserver":       true,
	"sendemail.tocmd":            true,
	"sendemail.cccmd":            true,
	"sendemail.headercmd":        true,
	"trailer.*.command":          true,
	"trailer.*.cmd":              true,
	"remote.*.uploadpack":        true, // run locally for a local or file:// remote
	"remote.*.receivepack":       true,
	"uploadpack.packobjectshook": true,
	"hook.*.command":             true, // config-based hooks (git 2.5x)
	"submodule.*.update":         true, // "!command" form
	"tar.*.command":              true, // git archive --format=<name>
	"imap.tunnel":                true, // git imap-send
	"guitool.*.cmd":              true, // git gui
	"instaweb.httpd":             true, // git instaweb
	"svn.authorsprog":            true, // git svn
	// Git LFS (run by git through its filter on checkout):
	// lfs.customtransfer.<name>.path and lfs.extension.<name>.clean|smudge,
	// whose subsection is "customtransfer.<name>" or "extension.<name>".
	"lfs.*.path":   true,
	"lfs.*.clean":  true,
	"lfs.*.smudge": true,
}

// gitPathKeys are variables naming a file or directory git runs from
// (hooks, templates whose hooks `git init` copies) or trusts (ignore and
// attribute rules, signers, TLS trust anchors). The value says whether git
// itself reads it as a file (see [Target.File]); the others
// name directories, or files read by a program git runs.
var gitPathKeys = map[string]bool{
	"core.hookspath":             false,
	"core.attributesfile":        true,
	"core.excludesfile":          true,
	"init.templatedir":           false,
	"gpg.ssh.allowedsignersfile": true,
	"gpg.ssh.revocationfile":     true,
	"http.sslcainfo":             false,
	"http.*.sslcainfo":           false,
	"http.sslcapath":             false,
	"http.*.sslcapath":           false,
	"http.sslcert":               false,
	"http.*.sslcert":             false,
	"http.sslkey":                false,
	"http.*.sslkey":              false,
}

func isPathKey(pat string) bool {
	_, ok := gitPathKeys[pat]
	return ok
}

// gitHookNames are the hooks git runs (githooks(5), git 2.39 to 2.47).
var gitHookNames = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
	"pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit",
	"pre-rebase", "post-checkout", "post-merge", "pre-push", "pre-receive",
	"update", "proc-receive", "post-receive", "post-update",
	"reference-transaction", "push-to-checkout", "pre-auto-gc",
	"post-rewrite", "sendemail-validate", "fsmonitor-watchman",
	"p4-changelist", "p4-prepare-changelist", "p4-post-changelist",
	"p4-pre-submit", "post-index-change",
}

// keyPattern is e's name with any subsection replaced by "*".
func keyPattern(e ConfigEntry) string {
	if e.Subsection() == "" {
		return e.Name
	}
	return e.Section() + ".*." + e.Key()
}

// gitConfigVar is one variable with the file it came from.
type gitConfigVar struct {
	ConfigEntry
	file string // "" for the environment (GIT_CONFIG_COUNT)
}

func (v gitConfigVar) where() string {
	if v.file == "" {
		return v.Name + " in the environment"
	}
	return fmt.Sprintf("%s in %s:%d", v.Name, v.file, v.Line)
}

type gitScan struct {
	roots   []string
	getenv  func(string) string
	home    string
	out     []Target
	files   map[string][]gitConfigVar // parsed config files (with includes)
	repos   map[string]bool           // gitdirs already scanned
	global  []gitConfigVar
	scanned int
}

// Targets returns the paths inside the writable roots that git's
// configuration or a repository's index makes git run or trust, for every
// repository that contains a writable root or is a submodule or linked
// worktree of one. An error means a config file git would read cannot be
// parsed: git would refuse it too, and agentbox cannot tell what it names.
func Targets(roots []string, getenv func(string) string) ([]Target, error) {
	s := &gitScan{roots: roots, getenv: getenv, home: getenv("HOME"),
		files: map[string][]gitConfigVar{}, repos: map[string]bool{}}
	if err := s.loadGlobal(); err != nil {
		return nil, err
	}
	for _, r := range roots {
		if repo, ok := discoverRepo(r); ok {
			// A repository above the root but inside another root (a
			// workspace in a checkout under /tmp) has a .git that no
			// protected name covers.
			s.target(filepath.Join(repo.top, ".git"), "repository containing "+r)
			if repo.top != r {
				// A root below the top of a checkout (a package of a
				// monorepo) has no .git of its own; the user reviewing
				// runs git there, and git would take a HEAD, objects/ and
				// refs/ the command planted in it for a bare repository
				// (finding 6). Without a HEAD it cannot plant one; deeper
				// directories need safe.bareRepository=explicit.
				s.target(filepath.Join(r, "HEAD"), "no bare repository planted at "+r)
			}
			if err := s.scanRepo(repo, 0); err != nil {
				return nil, err
			}
		}
	}
	// Absolute and ~ paths in the global config matter even where no
	// repository is found yet.
	if err := s.applyVars(s.global, gitRepo{}); err != nil {
		return nil, err
	}
	return s.out, nil
}

// gitRepo is a repository as git finds it.
type gitRepo struct {
	gitdir string // HEAD, index, config.worktree
	common string // config, hooks, worktrees/ (the gitdir unless a linked worktree)
	top    string // the worktree's top directory; "" when unknown
}

// discoverRepo walks up from dir as git's discovery does (setup.c): the
// first directory holding a .git directory or a "gitdir:" file wins.
func discoverRepo(dir string) (gitRepo, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if repo, ok := repoAt(d); ok {
			return repo, true
		}
		if filepath.Dir(d) == d {
			return gitRepo{}, false
		}
	}
}

// repoAt returns the repository whose worktree top is top, if top/.git
// names one.
func repoAt(top string) (gitRepo, bool) {
	dotgit := filepath.Join(top, ".git")
	fi, err := os.Stat(dotgit)
	if err != nil {
		return gitRepo{}, false
	}
	gitdir := dotgit
	if fi.Mode().IsRegular() {
		gd, err := ReadGitdirFile(dotgit)
		if err != nil || gd == "" {
			return gitRepo{}, false
		}
		gitdir = gd
	} else if !fi.IsDir() {
		return gitRepo{}, false
	}
	// git skips a .git that is not a repository (is_git_directory) and
	// looks further up; so must this, or an empty placeholder .git that a
	// concurrent run holds in the same workspace would hide the enclosing
	// repository. Every gitdir has a HEAD.
	if _, err := os.Lstat(filepath.Join(gitdir, "HEAD")); err != nil {
		return gitRepo{}, false
	}
	repo := gitRepo{gitdir: gitdir, common: gitdir, top: top}
	if c, err := ReadCommondir(gitdir); err == nil && c != "" {
		repo.common = c
	}
	return repo, true
}

func (s *gitScan) loadGlobal() error {
	var files []string
	if g := s.getenv("GIT_CONFIG_GLOBAL"); g != "" {
		files = append(files, g)
	} else {
		xdg := s.getenv("XDG_CONFIG_HOME")
		if xdg == "" && s.home != "" {
			xdg = filepath.Join(s.home, ".config")
		}
		if xdg != "" {
			// The whole directory: config, attributes, ignore and
			// credentials live there, and a missing config may be
			// created.
			s.target(filepath.Join(xdg, "git"), "git's XDG config directory")
			files = append(files, filepath.Join(xdg, "git", "config"))
		}
		if s.home != "" {
			files = append(files, filepath.Join(s.home, ".gitconfig"))
		}
	}
	if s.getenv("GIT_CONFIG_NOSYSTEM") == "" {
		if sys := s.getenv("GIT_CONFIG_SYSTEM"); sys != "" {
			files = append(files, sys)
		} else {
			files = append(files, "/etc/gitconfig", "/usr/local/etc/gitconfig")
		}
	}
	for _, f := range files {
		s.fileTarget(f, "git config file")
		vars, err := s.loadFile(f, 0)
		if err != nil {
			return err
		}
		s.global = append(s.global, vars...)
	}
	// GIT_CONFIG_COUNT/KEY_n/VALUE_n as in agentbox's environment: the
	// shell the user runs git from afterwards likely has the same.
	if n, err := strconv.Atoi(s.getenv(EnvCount)); err == nil && n > 0 {
		for i := 0; i < n && i < 1000; i++ {
			k := s.getenv(EnvKey(i))
			if k == "" {
				continue
			}
			s.global = append(s.global, gitConfigVar{ConfigEntry: ConfigEntry{
				Name: canonicalKey(k), Value: s.getenv(EnvValue(i))}})
		}
	}
	return nil
}

// canonicalKey lowercases the section and key of a dotted name given on
// the command line or in the environment, keeping the subsection.
func canonicalKey(k string) string {
	i, j := strings.IndexByte(k, '.'), strings.LastIndexByte(k, '.')
	if i < 0 {
		return strings.ToLower(k)
	}
	return strings.ToLower(k[:i]) + k[i:j] + strings.ToLower(k[j:])
}

// loadFile parses a config file and, in place, the files its include.path
// and includeIf.*.path name (every condition counts: a condition false now
// may hold for the user's next git command). A missing or unreadable file
// is no error: git skips it too.
func (s *gitScan) loadFile(path string, depth int) ([]gitConfigVar, error) {
	return s.loadConfig(path, depth, false)
}

// loadConfig is loadFile; planted says path was included from a file
// inside a writable root. Such a file, and any it includes, the command
// may have written (a repository planted above the workspace, in /tmp):
// whatever is wrong with it (unparsable, a FIFO, too big, includes nested
// too deep or too many) skips it rather than failing the run, or one run
// could make every later one fail. Nothing it names is trusted to be the
// user's: it is a planted repository's config, an open vector the README
// names, and git, for the malformed ones, refuses or cannot read it too.
func (s *gitScan) loadConfig(path string, depth int, planted bool) ([]gitConfigVar, error) {
	planted = planted || s.inRoot(path)
	vars, err := s.loadConfig1(path, depth, planted)
	if err != nil && planted {
		return nil, nil
	}
	return vars, err
}

func (s *gitScan) loadConfig1(path string, depth int, planted bool) ([]gitConfigVar, error) {
	if depth > 10 { // git's own include depth limit
		return nil, fmt.Errorf("git config %s: includes nested deeper than 10", path)
	}
	if vars, ok := s.files[path]; ok {
		return vars, nil
	}
	s.files[path] = nil // an include loop ends here, as git's depth limit would
	if s.scanned++; s.scanned > 256 {
		return nil, fmt.Errorf("git config %s: more than 256 config files to read", path)
	}
	data, err := ReadConfigFile(path)
	if err != nil {
		// A directory holds no config, and git reads none from it: it is
		// typically another run's placeholder for a missing protected
		// config file (~/.gitconfig with the workspace at $HOME).
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrConfigDir) {
			return nil, nil
		}
		return nil, fmt.Errorf("git config %s: %w", path, err)
	}
	entries, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("git config %s: %w (git refuses this file too; agentbox cannot tell which programs it makes git run)", path, err)
	}
	var out []gitConfigVar
	for _, e := range entries {
		v := gitConfigVar{ConfigEntry: e, file: path}
		out = append(out, v)
		if e.Key() != "path" || e.NoValue || e.Value == "" {
			continue
		}
		if sec := e.Section(); !(sec == "include" && e.Subsection() == "") && sec != "includeif" {
			continue
		}
		inc := s.expand(e.Value)
		if inc == "" {
			continue
		}
		if !filepath.IsAbs(inc) {
			inc = fspath.JoinRaw(filepath.Dir(path), inc)
		}
		s.fileTarget(inc, "included from "+v.where())
		sub, err := s.loadConfig(inc, depth+1, planted)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	s.files[path] = out
	return out, nil
}

// expand does git's ~ expansion for pathname values (git-config(1),
// "pathname"): "~/" is $HOME, "~user/" that user's home; "%(prefix)/"
// (git's installation prefix) yields "", which callers skip.
func (s *gitScan) expand(p string) string {
	if strings.HasPrefix(p, "%(prefix)/") {
		return "" // git's installation prefix: not the command's to write
	}
	if !strings.HasPrefix(p, "~") {
		return p
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	home := s.home
	if name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			return ""
		}
		home = u.HomeDir
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, rest)
}

// scanRepo collects the targets of one repository: its config, its
// submodules (from the index: the gitlinks, which the command cannot edit,
// unlike .gitmodules) and its linked worktrees, recursively.
func (s *gitScan) scanRepo(repo gitRepo, depth int) error {
	if depth > 8 || s.repos[repo.gitdir] {
		return nil
	}
	s.repos[repo.gitdir] = true
	vars, err := s.loadFile(filepath.Join(repo.common, "config"), 0)
	if err != nil {
		return err
	}
	wt, err := s.loadFile(filepath.Join(repo.gitdir, "config.worktree"), 0)
	if err != nil {
		return err
	}
	vars = append(slices.Clip(vars), wt...)
	all := append(slices.Clip(vars), s.global...)
	if err := s.applyVars(all, repo); err != nil {
		return err
	}

	// Linked worktrees: each one's .git file is named in
	// <common>/worktrees/<id>/gitdir, and re-pointed it would hand the
	// user's next git command there a gitdir the sandbox made.
	if depth == 0 || repo.common == repo.gitdir {
		ents, _ := os.ReadDir(filepath.Join(repo.common, "worktrees"))
		for i, e := range ents {
			if i >= 256 {
				break
			}
			wgd := filepath.Join(repo.common, "worktrees", e.Name())
			dotgit, err := ReadWorktreeGitdir(wgd)
			if err != nil || dotgit == "" {
				continue
			}
			s.target(dotgit, "linked worktree of "+repo.common)
			if err := s.scanRepo(gitRepo{gitdir: wgd, common: repo.common, top: filepath.Dir(dotgit)}, depth+1); err != nil {
				return err
			}
		}
	}

	// Submodules lie beneath the worktree top: a worktree that neither
	// holds nor lies in a writable root has none to protect.
	if repo.top == "" || !s.relatesToRoot(repo.top) {
		return nil
	}
	config := make([]ConfigEntry, len(vars))
	for i, v := range vars {
		config[i] = v.ConfigEntry
	}
	hashLen := HashLen(config)
	var links []string
	for _, ix := range IndexFiles(repo.gitdir) {
		l, err := IndexGitlinks(ix, hashLen)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if s.inRoot(ix) {
				// Planted by the command (a repository above the
				// workspace): git refuses a corrupt index too, and
				// failing would deny every later run.
				continue
			}
			return fmt.Errorf("reading the submodules of %s: %w", repo.top, err)
		}
		links = append(links, l...)
	}
	for _, l := range links {
		if !SafeIndexPath(l) {
			continue
		}
		subTop := filepath.Join(repo.top, filepath.FromSlash(l))
		s.target(filepath.Join(subTop, ".git"), "submodule "+l+" of "+repo.top)
		if sub, ok := repoAt(subTop); ok {
			if err := s.scanRepo(sub, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyVars turns the variables that name something git runs or trusts
// into targets. Relative paths are resolved where git resolves them: the
// worktree top for a non-bare repository (git runs hooks and commands
// there; githooks(5)), the gitdir for a bare one; without a repository
// only absolute and ~ paths count.
func (s *gitScan) applyVars(vars []gitConfigVar, repo gitRepo) error {
	base := repo.top
	if base == "" {
		base = repo.gitdir
	}
	abs := func(p string) string {
		p = s.expand(p)
		if p == "" {
			return ""
		}
		if filepath.IsAbs(p) {
			return p
		}
		if base == "" {
			return ""
		}
		return fspath.JoinRaw(base, p)
	}
	for _, v := range vars {
		pat := keyPattern(v.ConfigEntry)
		switch {
		case isPathKey(pat):
			if v.NoValue || v.Value == "" {
				continue
			}
			p := abs(v.Value)
			if p == "" {
				continue
			}
			if s.holdsRoot(p) {
				// Protecting p would make a whole writable root read-only:
				// protect what git runs from it instead.
				switch pat {
				case "core.hookspath":
					for _, h := range gitHookNames {
						s.target(filepath.Join(p, h), v.where())
					}
				case "init.templatedir":
					s.target(filepath.Join(p, "hooks"), v.where())
				}
				continue
			}
			if gitPathKeys[pat] {
				s.fileTarget(p, v.where())
			} else {
				s.target(p, v.where())
			}
			// husky 9 sets core.hooksPath = .husky/_, whose generated
			// hooks run the user's scripts in .husky/ itself.
			if pat == "core.hookspath" && filepath.Base(filepath.Clean(p)) == "_" {
				s.target(filepath.Dir(filepath.Clean(p)), v.where()+" (husky runs the scripts in the parent)")
			}
		case gitRunKeys[pat] || v.Section() == "pager" || v.Section() == "alias":
			if v.NoValue {
				continue
			}
			cmd := v.Value
			switch {
			case v.Section() == "alias" || pat == "submodule.*.update":
				var ok bool
				if cmd, ok = strings.CutPrefix(cmd, "!"); !ok {
					continue
				}
			case v.Section() == "pager" || pat == "core.fsmonitor":
				if _, isBool := Bool(v.ConfigEntry); isBool {
					continue
				}
			case pat == "credential.helper" || pat == "credential.*.helper":
				cmd = strings.TrimPrefix(cmd, "!")
			}
			for _, w := range shellWords(cmd) {
				if w.text == "" || strings.HasPrefix(w.text, "-") {
					continue
				}
				// The program when it is a path (a bare name is looked up
				// in PATH); any other word naming an existing file (the
				// script of "sh hook.sh").
				if w.program && !strings.Contains(w.text, "/") && !strings.HasPrefix(w.text, "~") {
					continue
				}
				p := abs(w.text)
				if p == "" {
					continue
				}
				if !w.program {
					if _, err := os.Lstat(p); err != nil {
						continue
					}
				}
				if s.holdsRoot(p) {
					continue // a directory: git cannot run it
				}
				s.target(p, v.where())
			}
		}
	}
	return nil
}

// relatesToRoot reports whether dir lies in a writable root or holds one.
func (s *gitScan) relatesToRoot(dir string) bool {
	return s.holdsRoot(dir) || fspath.InnermostRoot(filepath.Clean(dir), s.roots) != ""
}

// holdsRoot reports whether p is a writable root or an ancestor of one.
func (s *gitScan) holdsRoot(p string) bool {
	c := filepath.Clean(p)
	for _, r := range s.roots {
		if fspath.Within(r, c) {
			return true
		}
	}
	return false
}

// inRoot reports whether p, or where it leads, lies inside a writable root.
func (s *gitScan) inRoot(p string) bool {
	if fspath.InnermostRoot(filepath.Clean(p), s.roots) != "" {
		return true
	}
	target, links := fspath.Resolve(p)
	in := fspath.InnermostRoot(target, s.roots) != ""
	for _, l := range links {
		in = in || fspath.InnermostRoot(l, s.roots) != ""
	}
	return in
}

// target records p if it lies inside a writable root (elsewhere it is
// read-only anyway).
func (s *gitScan) target(p, why string) { s.add(Target{Path: p, Why: why}) }

// fileTarget records p, which git reads as a file, like target.
func (s *gitScan) fileTarget(p, why string) { s.add(Target{Path: p, Why: why, File: true}) }

func (s *gitScan) add(t Target) {
	if filepath.IsAbs(t.Path) && s.inRoot(t.Path) {
		s.out = append(s.out, t)
	}
}

// isAssignment reports whether w is a shell variable assignment (NAME=...).
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellWord is one word of a command; program marks the words in command
// position (the first, and the first after ; | & or an assignment prefix).
type shellWord struct {
	text    string
	program bool
}

// shellWords splits a command into words the way sh would for plain
// words, quotes, backslashes and the ; | & separators; anything fancier
// (expansions, redirections, functions) stays inside the words, which
// only ever makes agentbox protect more or look at paths that do not
// exist.
func shellWords(s string) []shellWord {
	var words []shellWord
	var cur strings.Builder
	in, program := false, true
	end := func() {
		if in {
			w := cur.String()
			assign := program && isAssignment(w)
			words = append(words, shellWord{text: w, program: program && !assign})
			program = assign
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			end()
		case c == ';' || c == '|' || c == '&' || c == '(' || c == ')' || c == '{' || c == '}' || c == '!' && !in:
			end()
			program = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			in = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	end()
	return words
}

// SafeBareRepository reads the user's effective safe.bareRepository
// from the global and system git config (git honours it only there) as
// the environment getenv reads points at them, with the reader [Targets]
// uses to find what git would run: the value ("" when unset, git's
// default "all") and the file that set it. agentbox cannot stop a command
// from writing a repository skeleton (HEAD, objects/, refs/, config) in a
// directory it may write; with "explicit", git refuses to use one that is
// not named with --git-dir or GIT_DIR, which is git's own defence (git
// 2.38 and later).
func SafeBareRepository(getenv func(string) string) (value, file string, err error) {
	s := &gitScan{getenv: getenv, home: getenv("HOME"), files: map[string][]gitConfigVar{}, repos: map[string]bool{}}
	if err := s.loadGlobal(); err != nil {
		return "", "", err
	}
	for _, v := range s.global {
		if v.Name == "safe.barerepository" {
			value, file = strings.ToLower(v.Value), v.file
		}
	}
	return value, file, nil
}
