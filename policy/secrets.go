package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/secrets"
)

// Secrets: the paths a command must not read ([Policy.Hidden]) and the
// environment it gets ([Policy.FilterEnv]). The built-in list and the
// variable patterns are internal/secrets' data; this file resolves them
// for one command, with the config's [filesystem] and
// [shell_environment_policy] and the Options.DenyRead, AllowRead and
// PassEnv that come from --deny-read, --allow-read and --env.

// Hidden is one path a command must not read: a file reads as empty, a
// directory lists as empty.
type Hidden struct {
	// Path is absolute and free of symlinks.
	Path string
	// Kind is Dir or File (File for anything that is not a directory).
	Kind ProtectedKind
	// Why names the rule: "ssh private keys", "deny_read **/*.pem".
	Why string
	// Reopen are paths beneath a hidden directory that stay readable:
	// .ssh's public keys, known_hosts and config, and allow_read entries
	// that lie inside it. Each is absolute, exists, and is Path joined
	// with one or more names; an entry that is a symbolic link is to be
	// recreated as the same link, not followed (its target is hidden or
	// not on its own terms).
	Reopen []string
}

// HideRule is one rule Hidden is expanded from, kept so that a session
// can expand it again for a later command ([Policy.HiddenNow]) and so
// that backends that match patterns themselves (Seatbelt) have them.
type HideRule struct {
	// Base is an absolute path free of glob syntax, with symlinks
	// resolved where it exists.
	Base string
	// Pattern is a slash glob matched below Base ("" = Base itself):
	// "*", "?" and "[...]" within one name, a leading dot included;
	// "**" any number of names.
	Pattern string
	// Keep are name patterns of a matched directory's direct entries
	// that stay readable.
	Keep []string
	// Why names the rule in messages.
	Why string
}

// EnvPolicy is the command's environment rule: Codex's
// shell_environment_policy (inherit, exclude, include_only, set,
// ignore_default_excludes) and --env NAME (Pass).
type EnvPolicy = secrets.EnvPolicy

// EnvVar is a NAME=VALUE of [EnvPolicy].Set.
type EnvVar = secrets.EnvVar

// Hidden are the paths the command must not read, sorted by path (a
// directory before what lies inside it; a path inside a hidden
// directory is listed only when it lies inside one of its Reopen
// entries too). Empty in danger-full-access.
func (p *Policy) Hidden() []Hidden { return cloneHidden(p.f.Hidden) }

// HideRules are the rules [Policy.Hidden] was expanded from.
func (p *Policy) HideRules() []HideRule { return cloneRules(p.f.HideRules) }

// AllowRead are the paths re-opened although a rule hides them
// (allow_read, --allow-read), absolute, symlinks resolved.
func (p *Policy) AllowRead() []string { return slices.Clone(p.f.AllowRead) }

// GlobScanMaxDepth is how deep "**" reaches when a rule is expanded.
func (p *Policy) GlobScanMaxDepth() int { return p.f.GlobScanMaxDepth }

// HiddenNow expands the rules again, as [Resolve] did, for what exists
// now: a session calls it for each later command, so that a file a
// pattern matches that appeared since is hidden too. It fails, and the
// command must not run, when an expansion goes past its bound.
func (p *Policy) HiddenNow() ([]Hidden, error) {
	if p.f.Mode == DangerFullAccess {
		return nil, nil
	}
	return expandHidden(p.f.HideRules, p.f.AllowRead, p.bounds(), p.keepReadable())
}

// Env is the command's environment rule.
func (p *Policy) Env() EnvPolicy { return cloneEnv(p.f.Env) }

// FilterEnv applies [Policy.Env] to env (NAME=VALUE entries): it
// returns the command's environment and the sorted names of env's
// variables withheld from it (names only, for the run report).
func (p *Policy) FilterEnv(env []string) (out, withheld []string) {
	return secrets.FilterEnv(p.f.Env, env, runtime.GOOS)
}

func (p *Policy) bounds() secrets.Bounds {
	b := secrets.DefaultBounds
	if p.f.GlobScanMaxDepth > 0 {
		b.MaxDepth = p.f.GlobScanMaxDepth
	}
	return b
}

// keepReadable are the directories no rule may hide: the workspace and
// the writable roots (hiding one would leave the command nothing to
// work in, and a mask over a writable root would be a mount the
// command's own writes land in).
func (p *Policy) keepReadable() []string {
	return append([]string{p.f.Cwd}, p.f.WritableRoots...)
}

// resolveSecrets fills the hidden paths and the environment rule, once
// the workspace and the writable roots are known.
func (p *Policy) resolveSecrets(o Options, cfg *Config, getenv func(string) string, goos string) error {
	env, err := resolveEnvPolicy(o, cfg)
	if err != nil {
		return err
	}
	p.f.Env = env
	if p.f.Mode == DangerFullAccess {
		return nil
	}
	fsc := cfg.Filesystem
	if fsc.GlobScanMaxDepth != nil {
		p.f.GlobScanMaxDepth = *fsc.GlobScanMaxDepth
	}
	homes := newConfineRule(getenv, goos).homePaths()
	var rules []HideRule
	if fsc.DefaultDenyRead == nil || *fsc.DefaultDenyRead {
		for _, h := range homes {
			for _, e := range secrets.Defaults() {
				rules = append(rules, makeRule(h, e.Path, e.Keep, e.Why))
			}
		}
	}
	roots := p.keepReadable()
	type given struct{ pattern, what string }
	var deny []given
	for _, d := range fsc.DenyRead {
		deny = append(deny, given{d, "deny_read"})
	}
	for _, d := range o.DenyRead {
		deny = append(deny, given{d, "Options.DenyRead"})
	}
	for _, d := range deny {
		if err := validDenyPattern(d.pattern); err != nil {
			return fmt.Errorf("%s: %w", d.what, err)
		}
		why := d.what + " " + d.pattern
		for _, base := range patternBases(d.pattern, homes, roots) {
			rules = append(rules, makeRule(base.dir, base.rest, nil, why))
		}
	}
	var allow []string
	for _, a := range slices.Concat(fsc.AllowRead, o.AllowRead) {
		if a == "" || strings.ContainsRune(a, 0) {
			return fmt.Errorf("allow_read: %q is not a path", a)
		}
		if secrets.HasMeta(a) {
			return fmt.Errorf("allow_read %s: a path, not a pattern (allow_read re-opens one path)", a)
		}
		for _, b := range patternBases(a, homes, []string{p.f.Cwd}) {
			path := filepath.Join(b.dir, filepath.FromSlash(b.rest))
			if real, err := filepath.EvalSymlinks(path); err == nil {
				path = real
			}
			if !slices.Contains(allow, path) {
				allow = append(allow, path)
			}
		}
	}
	p.f.HideRules = rules
	p.f.AllowRead = allow
	hidden, err := expandHidden(rules, allow, p.bounds(), roots)
	if err != nil {
		return err
	}
	p.f.Hidden = hidden
	return nil
}

// makeRule is the rule for the slash pattern pat below dir.
func makeRule(dir, pat string, keep []string, why string) HideRule {
	base, rest := secrets.SplitBase(pat)
	b := filepath.Join(dir, filepath.FromSlash(base))
	if real, err := filepath.EvalSymlinks(b); err == nil {
		b = real
	}
	return HideRule{Base: b, Pattern: rest, Keep: slices.Clone(keep), Why: why}
}

// patternBase is where a given pattern applies: below dir, the slash
// pattern rest.
type patternBase struct{ dir, rest string }

// patternBases are the places a deny_read or allow_read entry applies:
// each home for "~" and "~/...", the path itself when absolute, and
// each of roots (the workspace and the writable roots) when relative.
func patternBases(pattern string, homes, roots []string) []patternBase {
	slash := filepath.ToSlash(pattern)
	switch {
	case slash == "~" || strings.HasPrefix(slash, "~/"):
		rest := strings.TrimPrefix(strings.TrimPrefix(slash, "~"), "/")
		var out []patternBase
		for _, h := range homes {
			out = append(out, patternBase{h, rest})
		}
		return out
	case filepath.IsAbs(pattern):
		vol := filepath.VolumeName(pattern)
		return []patternBase{{vol + string(filepath.Separator), strings.TrimLeft(filepath.ToSlash(pattern[len(vol):]), "/")}}
	default:
		var out []patternBase
		for _, r := range roots {
			out = append(out, patternBase{r, strings.TrimPrefix(slash, "./")})
		}
		return out
	}
}

// validDenyPattern accepts a path or a glob.
func validDenyPattern(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q is not a path or pattern", p)
	}
	if strings.HasPrefix(p, "~") && p != "~" && !strings.HasPrefix(filepath.ToSlash(p), "~/") {
		return fmt.Errorf("%q: only ~ (your home) is understood, not ~user", p)
	}
	return secrets.ValidPattern(filepath.ToSlash(p))
}

// expandHidden expands rules, drops what allow re-opens, and refuses a
// rule that would hide one of keep (or a directory holding one).
func expandHidden(rules []HideRule, allow []string, b secrets.Bounds, keep []string) ([]Hidden, error) {
	found := map[string]*Hidden{}
	for _, r := range rules {
		var cands []string
		if r.Pattern == "" {
			cands = []string{r.Base}
		} else {
			m, err := secrets.Expand(r.Base, r.Pattern, b)
			if err != nil {
				return nil, fmt.Errorf("%s (%s below %s): %w; narrow the pattern, or raise [filesystem] glob_scan_max_depth if the tree is deep", r.Why, r.Pattern, r.Base, err)
			}
			cands = m
		}
		for _, c := range cands {
			real, err := filepath.EvalSymlinks(c)
			if err != nil {
				if unreachable(c, err) {
					continue
				}
				return nil, fmt.Errorf("%s: %w", r.Why, err)
			}
			fi, err := os.Stat(real)
			if err != nil {
				if unreachable(real, err) {
					continue
				}
				return nil, fmt.Errorf("%s: %w", r.Why, err)
			}
			if slices.Contains(allow, real) {
				continue
			}
			for _, k := range keep {
				if fspath.Within(k, real) {
					return nil, fmt.Errorf("%s hides %s, which is or holds the workspace or writable root %s: re-open it with allow_read (--allow-read %s), drop the rule, or work elsewhere", r.Why, real, k, real)
				}
			}
			h := found[real]
			if h == nil {
				h = &Hidden{Path: real, Kind: File, Why: r.Why}
				if fi.IsDir() {
					h.Kind = Dir
				}
				found[real] = h
			}
			if h.Kind == Dir && len(r.Keep) > 0 {
				ents, err := os.ReadDir(real)
				if err != nil && !errors.Is(err, fs.ErrPermission) {
					return nil, fmt.Errorf("%s: %w", r.Why, err)
				}
				for _, e := range ents {
					for _, k := range r.Keep {
						if ok, _ := path.Match(k, e.Name()); ok {
							h.Reopen = append(h.Reopen, filepath.Join(real, e.Name()))
							break
						}
					}
				}
			}
		}
	}
	// allow_read entries inside a hidden directory re-open just themselves.
	for _, a := range allow {
		for _, h := range found {
			if h.Kind == Dir && a != h.Path && fspath.Within(a, h.Path) {
				if _, err := os.Lstat(a); err == nil {
					h.Reopen = append(h.Reopen, a)
				}
			}
		}
	}
	var out []Hidden
	for _, h := range found {
		slices.Sort(h.Reopen)
		h.Reopen = slices.Compact(h.Reopen)
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b Hidden) int { return comparePaths(a.Path, b.Path) })
	// A path inside a hidden directory is hidden by it already, unless
	// it lies inside something that directory re-opens.
	var kept []Hidden
	for _, h := range out {
		covered := false
		for _, o := range kept {
			if o.Kind == Dir && fspath.Within(h.Path, o.Path) && !slices.ContainsFunc(o.Reopen, func(r string) bool { return fspath.Within(h.Path, r) }) {
				covered = true
				break
			}
		}
		if !covered {
			kept = append(kept, h)
		}
	}
	return kept, nil
}

// unreachable reports whether err, from resolving path, means there is
// nothing at path this user can read, so nothing to hide from a command
// running as this user: it is missing (or a dangling link), a directory
// on the way is not searchable (another account's home), or a name on
// the way is not a directory.
func unreachable(path string, err error) bool {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return true
	}
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		fi, lerr := os.Lstat(p)
		if lerr == nil {
			return !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0
		}
		if p == filepath.Dir(p) {
			return false
		}
	}
}

// resolveEnvPolicy is [shell_environment_policy] plus Options.PassEnv.
func resolveEnvPolicy(o Options, cfg *Config) (EnvPolicy, error) {
	s := cfg.ShellEnvironmentPolicy
	var e EnvPolicy
	e.Inherit = secrets.InheritAll
	if s.Inherit != nil {
		in, err := secrets.ParseInherit(*s.Inherit)
		if err != nil {
			return e, fmt.Errorf("shell_environment_policy.inherit: %w", err)
		}
		e.Inherit = in
	}
	if s.IgnoreDefaultExcludes != nil {
		e.IgnoreDefaultExcludes = *s.IgnoreDefaultExcludes
	}
	e.Exclude = slices.Clone(s.Exclude)
	e.IncludeOnly = slices.Clone(s.IncludeOnly)
	for _, pat := range slices.Concat(e.Exclude, e.IncludeOnly) {
		if err := secrets.ValidNamePattern(pat); err != nil {
			return e, fmt.Errorf("shell_environment_policy: pattern %q: %w", pat, err)
		}
	}
	names := make([]string, 0, len(s.Set))
	for n := range s.Set {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := validEnvName(n); err != nil {
			return e, fmt.Errorf("shell_environment_policy.set: %w", err)
		}
		e.Set = append(e.Set, EnvVar{Name: n, Value: s.Set[n]})
	}
	for _, n := range o.PassEnv {
		if err := validEnvName(n); err != nil {
			return e, fmt.Errorf("Options.PassEnv: %w", err)
		}
		if !slices.Contains(e.Pass, n) {
			e.Pass = append(e.Pass, n)
		}
	}
	return e, nil
}

func validEnvName(n string) error {
	if n == "" || strings.ContainsAny(n, "=\x00") {
		return fmt.Errorf("%q is not a variable name", n)
	}
	return nil
}

func cloneHidden(hs []Hidden) []Hidden {
	out := slices.Clone(hs)
	for i := range out {
		out[i].Reopen = slices.Clone(out[i].Reopen)
	}
	return out
}

func cloneRules(rs []HideRule) []HideRule {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Keep = slices.Clone(out[i].Keep)
	}
	return out
}

func cloneEnv(e EnvPolicy) EnvPolicy {
	e.Exclude = slices.Clone(e.Exclude)
	e.IncludeOnly = slices.Clone(e.IncludeOnly)
	e.Set = slices.Clone(e.Set)
	e.Pass = slices.Clone(e.Pass)
	return e
}

// validateSecrets checks [filesystem] and [shell_environment_policy].
func (c *Config) validateSecrets() error {
	bad := func(key string, err error) error { return fmt.Errorf("config %s: key %s: %w", c.Path, key, err) }
	for _, d := range c.Filesystem.DenyRead {
		if err := validDenyPattern(d); err != nil {
			return bad("filesystem.deny_read", err)
		}
	}
	for _, a := range c.Filesystem.AllowRead {
		if a == "" || strings.ContainsRune(a, 0) || secrets.HasMeta(a) {
			return bad("filesystem.allow_read", fmt.Errorf("%q is not a path (allow_read re-opens one path, no patterns)", a))
		}
	}
	if d := c.Filesystem.GlobScanMaxDepth; d != nil && (*d < 1 || *d > 1024) {
		return bad("filesystem.glob_scan_max_depth", fmt.Errorf("%d is out of range (1 to 1024)", *d))
	}
	s := c.ShellEnvironmentPolicy
	if s.Inherit != nil {
		if _, err := secrets.ParseInherit(*s.Inherit); err != nil {
			return bad("shell_environment_policy.inherit", err)
		}
	}
	for _, p := range s.Exclude {
		if err := secrets.ValidNamePattern(p); err != nil {
			return bad("shell_environment_policy.exclude", fmt.Errorf("pattern %q: %w", p, err))
		}
	}
	for _, p := range s.IncludeOnly {
		if err := secrets.ValidNamePattern(p); err != nil {
			return bad("shell_environment_policy.include_only", fmt.Errorf("pattern %q: %w", p, err))
		}
	}
	for n := range s.Set {
		if err := validEnvName(n); err != nil {
			return bad("shell_environment_policy.set", err)
		}
	}
	return nil
}
