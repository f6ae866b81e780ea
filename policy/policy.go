package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/lookpath"
	"github.com/agentbox/agentbox/internal/toolcache"
)

// DefaultProtectedNames returns the names kept read-only inside every
// writable root unless the config's protected_subpaths replaces them: git's
// and the agents' own directories, and what agents and editors run on the
// host from a workspace (Claude Code's hooks in .claude/settings.json, MCP
// servers in .mcp.json, VS Code's tasks, the settings of JetBrains IDEs,
// Cursor, Gemini CLI and Zed).
func DefaultProtectedNames() []string { return slices.Clone(defaultProtectedNames) }

var defaultProtectedNames = []string{".git", ".codex", ".agents", ".claude", ".mcp.json", ".vscode", ".idea", ".cursor", ".gemini", ".zed"}

// Options are the inputs a caller (usually the CLI) gives to [Resolve].
// Zero values mean "not given": config and defaults apply. Errors name
// an option as Options.Field (Options.AddDirs, Options.Cwd, ...), so that
// a CLI can put its own flag names in their place.
type Options struct {
	Mode Mode // "" = config or default
	// Cwd is the workspace; "" = the current directory.
	Cwd string
	// AddDirs are further writable roots, relative to the current
	// directory (writable_roots in the config are relative to Cwd).
	AddDirs []string
	// Network turns the network fully on or off; nil = config or default.
	Network *bool
	// AllowDomains are egress patterns added to [network]
	// allowed_domains (see [NetworkSection]).
	AllowDomains []string
	// Publish are ports of the command to offer on the host's
	// 127.0.0.1, as "PORT" or "PORT:INNER" (added to [network] publish;
	// see [PortMap]).
	Publish []string
	// HostPorts are host loopback ports the command may connect to
	// (added to [network] host_ports).
	HostPorts []string
	// AllowDegraded overrides [linux] allow_degraded; nil = config.
	AllowDegraded *bool
	// AllowGitWrites overrides [sandbox_workspace_write]
	// allow_git_writes; nil = config.
	AllowGitWrites *bool
	Config         *Config // nil = no config file
	// DenyRead are further paths or globs the command must not read, as
	// [filesystem] deny_read takes them (--deny-read).
	DenyRead []string
	// AllowRead re-open paths a rule hides, as [filesystem] allow_read
	// (--allow-read).
	AllowRead []string
	// PassEnv are variables whose caller's value reaches the command
	// whatever [shell_environment_policy] says (--env NAME).
	PassEnv []string
	// ExtraProtected are further paths to keep read-only wherever they
	// are, such as the config file given. agentbox's default config
	// directory, its state directory and the running executable are
	// always protected: whatever decides how the next command is
	// sandboxed must not be writable by this one.
	ExtraProtected []string
}

// Policy is the resolved, immutable description of one sandboxed command.
// All paths are absolute and free of symlinks. Its parts depend on each
// other (the protected paths are derived from the writable roots), so it
// has no exported fields: build one with [Resolve] (or [ResolveFor], or
// [Unmarshal] of its encoding), and a variant by resolving changed
// [Options]. Slices the methods return are copies.
type Policy struct {
	f fields
	// src is what Resolve made the policy of, for [Policy.Widen]; nil
	// for a decoded policy ([Unmarshal]) and a variant (variant.go).
	src *source
}

// fields is the state of a Policy. Its JSON form, field by field in
// this order, is the policy's canonical encoding ([Policy.MarshalBinary]):
// a change here changes the encoding, and internal/policytest.Fields,
// which tests build policies through, must follow (its TestFields fails
// otherwise).
type fields struct {
	Mode             Mode
	Cwd              string
	WritableRoots    []string
	Protected        []Protected
	ProtectedNames   []string
	Network          bool
	Windows          WindowsSandbox
	AllowDegraded    bool
	AllowUnixSockets []string
	Egress           *AllowList
	Publish          []PortMap
	HostPorts        []uint16
	ToolCacheMode    ToolCacheMode
	ToolCaches       []ToolCache
	AllowGitWrites   bool
	PrivateTemps     []PrivateTemp
	SharedTemps      []string
	Hidden           []Hidden
	HideRules        []HideRule
	AllowRead        []string
	GlobScanMaxDepth int
	Env              EnvPolicy
}

// Mode is the sandbox mode.
func (p *Policy) Mode() Mode { return p.f.Mode }

// Cwd is the workspace and the command's working directory.
func (p *Policy) Cwd() string { return p.f.Cwd }

// WritableRoots are the directories writable beneath, sorted so a parent
// precedes its children. Empty unless the mode is [WorkspaceWrite].
func (p *Policy) WritableRoots() []string { return slices.Clone(p.f.WritableRoots) }

// Protected are the paths kept read-only although they lie inside (or are
// referenced from) a writable root, sorted by path.
func (p *Policy) Protected() []Protected { return slices.Clone(p.f.Protected) }

// ProtectedNames are the names protected in every writable root.
func (p *Policy) ProtectedNames() []string { return slices.Clone(p.f.ProtectedNames) }

// Network reports whether the command may use the network without limits.
// It is false whenever [Policy.AllowedDomains] is non-empty.
func (p *Policy) Network() bool { return p.f.Network }

// Windows is the Windows backend to use.
func (p *Policy) Windows() WindowsSandbox { return p.f.Windows }

// AllowDegraded reports whether, on Linux without user namespaces, the
// command may run with Landlock and seccomp only.
func (p *Policy) AllowDegraded() bool { return p.f.AllowDegraded }

// AllowUnixSockets are host unix sockets the command may connect to
// although they lie outside what it may reach otherwise (Linux), cleaned
// and with symlinks resolved where they exist.
func (p *Policy) AllowUnixSockets() []string { return slices.Clone(p.f.AllowUnixSockets) }

// AllowedDomains are the allow-list's patterns as written (the config's
// [network] allowed_domains, then [Options].AllowDomains). Non-empty
// means the command may reach only these destinations, through
// agentbox's proxy, and nothing else; empty means no allow-list (see
// [Policy.Network]).
func (p *Policy) AllowedDomains() []string {
	if p.f.Egress == nil {
		return nil
	}
	return rawPatterns(p.f.Egress.allowed)
}

// DeniedDomains are the patterns refused even when allowed ([network]
// denied_domains); empty without an allow-list.
func (p *Policy) DeniedDomains() []string {
	if p.f.Egress == nil {
		return nil
	}
	return rawPatterns(p.f.Egress.denied)
}

// AllowLocalBinding reports whether allowed names may resolve to
// loopback, private or link-local addresses ([network]
// allow_local_binding); false without an allow-list.
func (p *Policy) AllowLocalBinding() bool { return p.f.Egress != nil && p.f.Egress.allowLocal }

func rawPatterns(ps []pattern) []string {
	var out []string
	for _, pt := range ps {
		out = append(out, pt.Raw)
	}
	return out
}

// ToolCacheMode says how tool caches under $HOME are made writable
// (workspace-write only); see [ToolCacheMode].
func (p *Policy) ToolCacheMode() ToolCacheMode { return p.f.ToolCacheMode }

// ToolCaches are the known tool caches as resolved for this policy.
func (p *Policy) ToolCaches() []ToolCache { return toolcache.Clone(p.f.ToolCaches) }

// AllowGitWrites reports whether the backend may open .git directories
// for writing but for the paths through which git runs programs or
// reads other repositories ([sandbox_workspace_write] allow_git_writes;
// the README's "Git writes" lists them).
func (p *Policy) AllowGitWrites() bool { return p.f.AllowGitWrites }

// SharedTemps are the host's temporary directories (/tmp, $TMPDIR) that
// are writable roots because [sandbox_workspace_write] share_slash_tmp is
// set; empty otherwise.
func (p *Policy) SharedTemps() []string { return slices.Clone(p.f.SharedTemps) }

// ProtectedKind says what is on disk at a protected path.
type ProtectedKind int

const (
	// Missing: nothing exists yet; the backend must stop it being created.
	Missing ProtectedKind = iota
	// Dir is an existing directory.
	Dir
	// File is an existing regular file (for example a worktree's .git file).
	File
	// Symlink is an existing symbolic link; its target is protected too.
	Symlink
)

// String names the kind as messages show it ("missing", "dir", ...).
func (k ProtectedKind) String() string {
	return [...]string{"missing", "dir", "file", "symlink"}[k]
}

// Protected is one read-only carve-out.
type Protected struct {
	Path string
	Kind ProtectedKind
	// Root is the innermost writable root containing Path, or "" when the
	// path lies outside every writable root (then it is read-only anyway).
	Root string
	// Why explains the protection in messages: ".git in /w", "gitdir of /w/.git".
	Why string
	// FileWhenMissing: git reads the path as a file (a config file, an
	// include, an ignore or attributes file). Where it is Missing and a backend must put
	// something at its name, an empty read-only file keeps the reader
	// working; a directory there is a fatal "bad config line" for a git
	// include. It is set on an existing empty regular File too, which
	// may be another run's placeholder that the backend must hold.
	FileWhenMissing bool
}

// Resolve turns options and config into a Policy. It fails when a writable
// root does not exist or is not a directory, naming it.
func Resolve(o Options) (*Policy, error) { return resolveEnv(o, os.Getenv, runtime.GOOS) }

// resolveEnv is Resolve with the environment ($TMPDIR, %TEMP%, $HOME) read
// through getenv and the temp-directory rules of goos, which tests choose.
func resolveEnv(o Options, getenv func(string) string, goos string) (*Policy, error) {
	return resolveFor(o, Caller{Getenv: getenv}, goos)
}

// resolveFor is Resolve for the process caller describes: its environment,
// working directory, executable and argv[0] (each, when unset, this
// process's own), for the resident helper resolving a run on its
// client's behalf exactly as the client would have.
func resolveFor(o Options, caller Caller, goos string) (*Policy, error) {
	getenv := caller.Env()
	cfg := o.Config
	if cfg == nil {
		cfg = &Config{}
	}
	// A Codex permission profile, written into the keys read below.
	cfg, err := cfg.withProfile(getenv, goos)
	if err != nil {
		return nil, err
	}
	ww := cfg.SandboxWorkspaceWrite

	p := &Policy{f: fields{Mode: WorkspaceWrite, Windows: Unelevated, ProtectedNames: DefaultProtectedNames()}}
	if cfg.SandboxMode != nil {
		p.f.Mode = Mode(*cfg.SandboxMode)
	}
	if o.Mode != "" {
		m, err := ParseMode(string(o.Mode))
		if err != nil {
			return nil, err
		}
		p.f.Mode = m
	}
	if cfg.Windows.Sandbox != nil {
		p.f.Windows = WindowsSandbox(*cfg.Windows.Sandbox)
	}
	if ww.NetworkAccess != nil {
		p.f.Network = *ww.NetworkAccess
	}
	if o.Network != nil {
		p.f.Network = *o.Network
	}
	if p.f.Mode == DangerFullAccess {
		p.f.Network = true
	}
	if err := p.resolveEgress(o, cfg); err != nil {
		return nil, err
	}
	if err := p.resolvePorts(o, cfg); err != nil {
		return nil, err
	}
	if cfg.Linux.AllowDegraded != nil {
		p.f.AllowDegraded = *cfg.Linux.AllowDegraded
	}
	if o.AllowDegraded != nil {
		p.f.AllowDegraded = *o.AllowDegraded
	}
	if ww.AllowGitWrites != nil {
		p.f.AllowGitWrites = *ww.AllowGitWrites
	}
	if o.AllowGitWrites != nil {
		p.f.AllowGitWrites = *o.AllowGitWrites
	}
	p.f.ToolCacheMode = CachesOverlay
	if ww.ToolCaches != nil {
		m, err := ParseToolCacheMode(*ww.ToolCaches)
		if err != nil {
			return nil, fmt.Errorf("tool_caches: %w", err)
		}
		p.f.ToolCacheMode = m
	}
	if ww.ProtectedSubpaths != nil {
		for _, n := range ww.ProtectedSubpaths {
			if err := validProtectedName(n); err != nil {
				return nil, fmt.Errorf("protected_subpaths: %w", err)
			}
		}
		p.f.ProtectedNames = slices.Clone(ww.ProtectedSubpaths)
	}

	for _, sp := range ww.AllowUnixSockets {
		if err := validSocketPath(sp); err != nil {
			return nil, fmt.Errorf("allow_unix_sockets: %w", err)
		}
		sp = filepath.Clean(sp)
		// The sandbox compares the real path of the socket a connect
		// reaches: /var/run/docker.sock is /run/docker.sock there.
		if real, err := filepath.EvalSymlinks(sp); err == nil {
			sp = real
		}
		p.f.AllowUnixSockets = append(p.f.AllowUnixSockets, sp)
	}

	// The working directory only when a relative path needs it: a
	// caller whose directory was removed may still name absolute ones.
	var wd string
	absolute := func(p string) (string, error) {
		if filepath.IsAbs(p) {
			return p, nil
		}
		if wd == "" {
			d, err := caller.Wd()
			if err != nil {
				return "", fmt.Errorf("current directory: %w", err)
			}
			wd = d
		}
		if p == "." {
			// As os.Getwd gave it: cleaning would cancel a
			// "link/.." in $PWD textually.
			return wd, nil
		}
		return filepath.Join(wd, p), nil
	}
	cwd := o.Cwd
	if cwd == "" {
		cwd = "."
	}
	cwd, err = absolute(cwd)
	if err != nil {
		return nil, err
	}
	c, err := resolveDir(cwd, "", "workspace (Options.Cwd)")
	if err != nil {
		return nil, err
	}
	p.f.Cwd = c
	// Kept for Widen, with every path absolute: a later resolution must
	// not depend on the current directory then.
	src := &source{o: o, caller: caller, goos: goos}
	src.o.Cwd = c
	src.o.AddDirs = nil
	for _, d := range o.AddDirs {
		if abs, err := absolute(d); err == nil {
			d = abs
		}
		src.o.AddDirs = append(src.o.AddDirs, d)
	}
	p.src = src

	if p.f.Mode != WorkspaceWrite {
		if err := p.resolveSecrets(o, cfg, getenv, goos); err != nil {
			return nil, err
		}
		return p, nil
	}

	rule := newConfineRule(getenv, goos)
	type root struct{ path, what, fix, given string }
	fixSub := "name a subdirectory instead, or run with Options.Mode read-only"
	roots := []root{{c, "workspace (Options.Cwd)", "run from a subdirectory, name one with Options.Cwd DIR, or run with Options.Mode read-only", cwd}}
	for _, d := range o.AddDirs {
		if d == "" {
			return nil, errors.New("Options.AddDirs: empty path (name a directory)")
		}
		// A relative added root is relative to the caller's directory, as
		// for any shell argument; relative writable_roots in the config
		// are relative to the workspace, as in Codex.
		abs, err := absolute(d)
		if err != nil {
			return nil, fmt.Errorf("Options.AddDirs %s: %w", d, err)
		}
		// Cleaned, as filepath.Abs would.
		roots = append(roots, root{filepath.Clean(abs), "Options.AddDirs", fixSub, d})
	}
	for _, d := range ww.WritableRoots {
		what := "writable_roots"
		if n := cfg.ProfileName(); n != "" {
			what = fmt.Sprintf("a writable path of profile %s", n)
		}
		if cfg.Path != "" {
			what += " in " + cfg.Path
		}
		roots = append(roots, root{d, what, fixSub, d})
	}
	var userRoots []string
	for _, r := range roots {
		abs, err := resolveDir(r.path, c, r.what)
		if err != nil {
			return nil, err
		}
		if why := rule.check(abs); why != "" {
			fix := r.fix
			if abs == slashTmpPath(goos) {
				fix = "set [sandbox_workspace_write] share_slash_tmp = true to share the host's /tmp with the command"
			}
			return nil, refusal(r.what, r.given, abs, why, fix)
		}
		userRoots = append(userRoots, abs)
	}

	// The temporary directories agentbox adds itself: the host's, as
	// writable roots, with share_slash_tmp; otherwise private ones.
	excl := func(b *bool) bool { return b != nil && *b }
	share := excl(ww.ShareSlashTmp)
	var temps []root
	if goos == "windows" {
		if !excl(ww.ExcludeTmpdirEnvVar) {
			for _, v := range []string{"TEMP", "TMP"} {
				if d := getenv(v); d != "" {
					temps = append(temps, root{d, v, "point %" + v + "% at a directory of its own, or set [sandbox_workspace_write] exclude_tmpdir_env_var = true", d})
				}
			}
		}
	} else {
		if !excl(ww.ExcludeSlashTmp) {
			if _, err := os.Stat("/tmp"); err == nil {
				temps = append(temps, root{"/tmp", "", "", "/tmp"})
			}
		}
		if !excl(ww.ExcludeTmpdirEnvVar) {
			if d := getenv("TMPDIR"); d != "" {
				temps = append(temps, root{d, "TMPDIR", "point $TMPDIR at a directory of its own, or set [sandbox_workspace_write] exclude_tmpdir_env_var = true", d})
			}
		}
	}
	var tempDirs []tempDir
	for _, t := range temps {
		what := "/tmp"
		if t.what != "" {
			what = "$" + t.what
			if goos == "windows" {
				what = "%" + t.what + "%"
			}
		}
		abs, err := resolveDir(t.path, c, what)
		if err != nil {
			return nil, err
		}
		// /tmp itself is the one system directory agentbox makes a
		// writable root of (share_slash_tmp) or stands in for; a
		// private one may also hold the home, which stays visible.
		why := rule.check(abs)
		if abs == slashTmpPath(goos) && (why == whySystem || !share) {
			why = ""
		}
		if why != "" {
			return nil, refusal(what, t.path, abs, why, t.fix)
		}
		tempDirs = append(tempDirs, tempDir{abs, t.what})
	}
	all := userRoots
	if share {
		for _, t := range tempDirs {
			all = append(all, t.path)
			p.f.SharedTemps = append(p.f.SharedTemps, t.path)
		}
	} else {
		p.f.PrivateTemps = privateTemps(tempDirs, userRoots, rule.homePaths(), c, agentdirs.State(getenv, goos), goos)
	}
	seen := map[string]bool{}
	for _, r := range all {
		if !seen[r] {
			seen[r] = true
			p.f.WritableRoots = append(p.f.WritableRoots, r)
		}
	}
	slices.SortFunc(p.f.WritableRoots, comparePaths)

	extra := append([]string{}, o.ExtraProtected...)
	if d := agentdirs.Config(getenv); d != "" {
		extra = append(extra, filepath.Dir(d))
	}
	if d := agentdirs.State(getenv, goos); d != "" {
		extra = append(extra, d)
	}
	// A command able to replace agentbox's own binary would own the next
	// run (`go run` links it under /tmp, a writable root), and so would one
	// able to re-point the link the caller invokes it through
	// (~/.local/bin/agentbox, node_modules/.bin): protect both, and every
	// link on the way.
	if exe, err := caller.Exe(); err == nil {
		extra = append(extra, exe)
	}
	if invoked := invokedAs(caller, getenv("PATH"), absolute); invoked != "" {
		extra = append(extra, invoked)
	}
	readOnly, err := p.profileReadOnly(cfg, getenv, goos)
	if err != nil {
		return nil, err
	}
	prot, err := protectedPaths(p.f.WritableRoots, p.f.ProtectedNames, extra, readOnly, getenv)
	if err != nil {
		return nil, err
	}
	p.f.Protected = prot
	resolveToolCaches(p, getenv, goos, agentdirs.State(getenv, goos))
	if err := p.resolveSecrets(o, cfg, getenv, goos); err != nil {
		return nil, err
	}
	return p, nil
}

// invokedAs is the path the program was started through, made absolute
// without resolving links: argv[0] when it names a path, else its match
// in path (PATH), absolute matches only, as exec.LookPath gives them.
func invokedAs(c Caller, path string, absolute func(string) (string, error)) string {
	arg0 := c.Arg0
	if !c.Remote {
		if len(os.Args) == 0 {
			return ""
		}
		arg0 = os.Args[0]
	}
	if arg0 == "" {
		return ""
	}
	if !strings.ContainsRune(arg0, filepath.Separator) && !strings.ContainsRune(arg0, '/') {
		// Relative PATH entries are looked at from the caller's
		// directory (and their matches, relative, are not used).
		dir := ""
		if c.Remote {
			d, err := absolute(".")
			if err != nil {
				return ""
			}
			dir = d
		}
		p, _, err := lookpath.FindIn(arg0, path, dir)
		if err != nil || !filepath.IsAbs(p) {
			return ""
		}
		arg0 = p
	}
	if filepath.IsAbs(arg0) {
		return arg0
	}
	// Not cleaned: the kernel follows a link in "link/../x" first.
	abs, err := absolute(".")
	if err != nil {
		return ""
	}
	return fspath.JoinRaw(abs, arg0)
}

// slashTmpPath is /tmp as symlinks resolve it on this machine (macOS's is
// /private/tmp); "" on Windows.
func slashTmpPath(goos string) string {
	if goos == "windows" {
		return ""
	}
	if real, err := filepath.EvalSymlinks("/tmp"); err == nil {
		return real
	}
	return "/tmp"
}

// resolveDir makes dir absolute (relative to base), resolves symlinks and
// checks it is an existing directory.
func resolveDir(dir, base, what string) (string, error) {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s %s does not exist (create it or fix the path)", what, dir)
		}
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s %s is not a directory", what, dir)
	}
	return filepath.Clean(real), nil
}

// comparePaths orders paths so that a directory precedes everything inside
// it, whatever characters follow the separator.
func comparePaths(a, b string) int {
	return strings.Compare(strings.ReplaceAll(a, string(filepath.Separator), "\x00"),
		strings.ReplaceAll(b, string(filepath.Separator), "\x00"))
}

// IsWritable reports whether the policy lets the command write at path
// (absolute, symlink-free): beneath a writable root and not beneath a
// protected path. Backends use it to plan; enforcement is theirs.
func (p *Policy) IsWritable(path string) bool {
	if fspath.InnermostRoot(path, p.f.WritableRoots) == "" {
		return false
	}
	for _, pr := range p.f.Protected {
		if fspath.Within(path, pr.Path) {
			return false
		}
	}
	return true
}
