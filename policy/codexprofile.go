package policy

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/codexprofile"
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/secrets"
)

// Codex's permission profiles (default_permissions, [permissions.NAME]):
// internal/codexprofile reads them and says what they mean in
// agentbox's terms; this file resolves that for one command by filling
// the keys of the older language (sandbox_mode,
// [sandbox_workspace_write], [network], [filesystem]) the rest of
// Resolve reads, on a copy of the config. A file uses one language or
// the other (validateProfile), so nothing the user wrote is overwritten.

// ProfileName is the Codex permission profile the config selects
// (default_permissions), "" when it selects none.
func (c *Config) ProfileName() string {
	if c.profile == nil {
		return ""
	}
	return c.profile.Name
}

// validateProfile checks the profile language and keeps the selected
// profile's plan.
func (c *Config) validateProfile() error {
	var legacy []string
	if c.SandboxMode != nil {
		legacy = append(legacy, "sandbox_mode")
	}
	if !reflect.ValueOf(c.SandboxWorkspaceWrite).IsZero() {
		legacy = append(legacy, "[sandbox_workspace_write]")
	}
	if err := codexprofile.CheckMixed(c.DefaultPermissions, c.Permissions, legacy); err != nil {
		return fmt.Errorf("config %s: %w", c.Path, err)
	}
	plan, err := codexprofile.Resolve(c.DefaultPermissions, c.Permissions)
	if err != nil {
		return fmt.Errorf("config %s: %w", c.Path, err)
	}
	if plan != nil {
		what := fmt.Sprintf("config %s: key permissions.%s.network.domains", c.Path, plan.Name)
		if _, err := parseAllowList(plan.Network.Allowed, what, plan.Network.Denied, what, false); err != nil {
			return err
		}
		for _, r := range plan.DenyRead {
			if r.Anchor == codexprofile.Abs {
				if err := validDenyPattern(filepath.FromSlash(r.Path)); err != nil {
					return fmt.Errorf("config %s: key %s: %w", c.Path, r.Key, err)
				}
			}
		}
	}
	c.profile = plan
	return nil
}

// profileCaller is what applying a profile needs of the caller.
type profileCaller struct {
	getenv func(string) string
	goos   string
}

func (pc profileCaller) home() string {
	v := "HOME"
	if pc.goos == "windows" {
		v = "USERPROFILE"
	}
	if h := pc.getenv(v); h != "" {
		return h
	}
	if hs := newConfineRule(pc.getenv, pc.goos).homePaths(); len(hs) > 0 {
		return hs[0]
	}
	return ""
}

// anchorDirs are the directories a reference's anchor stands for; for
// WorkspaceRoots only the profile's further roots (the workspace itself
// is handled by the caller, who knows it), absolute.
func (pc profileCaller) anchorDirs(a codexprofile.Anchor, pl *codexprofile.Plan) []string {
	switch a {
	case codexprofile.Home:
		if h := pc.home(); h != "" {
			return []string{h}
		}
	case codexprofile.Tmpdir:
		v := "TMPDIR"
		if pc.goos == "windows" {
			v = "TEMP"
		}
		if d := pc.getenv(v); d != "" {
			return []string{d}
		}
	case codexprofile.SlashTmp:
		if pc.goos != "windows" {
			return []string{"/tmp"}
		}
	case codexprofile.WorkspaceRoots:
		var out []string
		for _, r := range pl.WorkspaceRoots {
			out = append(out, pc.paths(r, pl)...)
		}
		return out
	}
	return nil
}

// paths are the OS paths r stands for, apart from the workspace.
func (pc profileCaller) paths(r codexprofile.Ref, pl *codexprofile.Plan) []string {
	if r.Anchor == codexprofile.Abs {
		return []string{filepath.FromSlash(r.Path)}
	}
	var out []string
	for _, d := range pc.anchorDirs(r.Anchor, pl) {
		out = append(out, filepath.Join(d, filepath.FromSlash(r.Path)))
	}
	return out
}

// withProfile returns cfg with the selected profile written into the
// older keys, or cfg itself when it selects none.
func (cfg *Config) withProfile(getenv func(string) string, goos string) (*Config, error) {
	if cfg.profile == nil && codexprofile.Uses(cfg.DefaultPermissions, cfg.Permissions) {
		// A Config built in Go rather than read by ParseConfig.
		c := *cfg
		if err := c.validateProfile(); err != nil {
			return nil, err
		}
		cfg = &c
	}
	pl := cfg.profile
	if pl == nil {
		return cfg, nil
	}
	// A path the file wrote for another system (C:\x on Linux, /x on
	// Windows) names nothing here.
	for _, list := range [][]codexprofile.Ref{pl.WorkspaceRoots, pl.WritableRoots, pl.ReadOnly, pl.DenyRead, pl.AllowRead} {
		for _, r := range list {
			if r.Anchor == codexprofile.Abs && !agentdirs.Abs(filepath.FromSlash(r.Path), goos) {
				return nil, fmt.Errorf("config %s: key %s: %q is not an absolute path on %s", cfg.Path, r.Key, r.Path, goos)
			}
		}
	}
	pc := profileCaller{getenv, goos}
	c := *cfg
	mode := pl.Mode
	c.SandboxMode = &mode
	ww := &c.SandboxWorkspaceWrite
	yes, no := true, false
	exclTmpdir, exclSlash := !pl.Tmpdir, !pl.SlashTmp
	ww.ExcludeTmpdirEnvVar, ww.ExcludeSlashTmp = &exclTmpdir, &exclSlash
	if pl.AllowGitWrites != nil {
		ww.AllowGitWrites = pl.AllowGitWrites
	}
	if pl.Network.On {
		ww.NetworkAccess = &yes
	} else {
		ww.NetworkAccess = &no
	}
	ww.AllowUnixSockets = slices.Clone(pl.Network.UnixSockets)
	// Relative writable_roots are relative to the workspace, which is
	// what a WorkspaceRoots-anchored entry means there.
	ww.WritableRoots = nil
	if mode == string(WorkspaceWrite) {
		for _, r := range pl.WorkspaceRoots {
			ww.WritableRoots = append(ww.WritableRoots, pc.paths(r, pl)...)
		}
	}
	for _, r := range pl.WritableRoots {
		if r.Anchor == codexprofile.WorkspaceRoots {
			ww.WritableRoots = append(ww.WritableRoots, filepath.FromSlash(r.Path))
		}
		ww.WritableRoots = append(ww.WritableRoots, pc.paths(r, pl)...)
	}
	n := &c.Network
	n.AllowedDomains = slices.Concat(n.AllowedDomains, pl.Network.Allowed)
	n.DeniedDomains = slices.Concat(n.DeniedDomains, pl.Network.Denied)
	if n.AllowLocalBinding == nil {
		n.AllowLocalBinding = pl.Network.AllowLocalBinding
	}
	fs := &c.Filesystem
	fs.DenyRead = slices.Clone(fs.DenyRead)
	for _, r := range pl.DenyRead {
		fs.DenyRead = append(fs.DenyRead, pc.patterns(r, pl)...)
	}
	fs.AllowRead = slices.Clone(fs.AllowRead)
	for _, r := range pl.AllowRead {
		fs.AllowRead = append(fs.AllowRead, pc.patterns(r, pl)...)
	}
	// The profile's glob_scan_max_depth only ever deepens the scan. In
	// Codex it bounds a pre-expansion and matches below it stay
	// readable; agentbox hides every match to its own bound and refuses
	// to run past it, so a shallower bound would only make Codex's own
	// example (depth 3) fail in any deeper workspace.
	floor := secrets.DefaultBounds.MaxDepth
	if fs.GlobScanMaxDepth != nil {
		floor = *fs.GlobScanMaxDepth
	}
	if d := pl.GlobScanMaxDepth; d > floor {
		fs.GlobScanMaxDepth = &d
	}
	return &c, nil
}

// patterns are r as [filesystem] deny_read and allow_read take it: "~/"
// for the home (every home of the caller), relative for the workspace
// (and the writable roots), and absolute below the profile's further
// workspace roots and the temp directories.
func (pc profileCaller) patterns(r codexprofile.Ref, pl *codexprofile.Plan) []string {
	switch r.Anchor {
	case codexprofile.Home:
		if r.Path == "" {
			return []string{"~"}
		}
		return []string{"~/" + r.Path}
	case codexprofile.WorkspaceRoots:
		return append([]string{r.Path}, pc.paths(r, pl)...)
	}
	return pc.paths(r, pl)
}

// profileReadOnly are the profile's "read" entries that lie inside a
// writable root, to be kept read-only there (path -> why). A glob there
// is an error: agentbox keeps paths read-only, not patterns.
func (p *Policy) profileReadOnly(cfg *Config, getenv func(string) string, goos string) (map[string]string, error) {
	pl := cfg.profile
	if pl == nil || p.f.Mode != WorkspaceWrite {
		return nil, nil
	}
	pc := profileCaller{getenv, goos}
	out := map[string]string{}
	for _, r := range pl.ReadOnly {
		cands := pc.paths(r, pl)
		if r.Anchor == codexprofile.WorkspaceRoots {
			cands = append(cands, filepath.Join(p.f.Cwd, filepath.FromSlash(r.Path)))
		}
		for _, c := range cands {
			base := c
			if r.IsGlob() {
				b, _ := secrets.SplitBase(filepath.ToSlash(c))
				base = filepath.FromSlash(b)
			}
			if real, err := filepath.EvalSymlinks(base); err == nil {
				base = real
			}
			inRoot := fspath.InnermostRoot(base, p.f.WritableRoots) != ""
			if r.IsGlob() {
				holds := slices.ContainsFunc(p.f.WritableRoots, func(w string) bool { return fspath.Within(w, base) })
				if inRoot || holds {
					return nil, fmt.Errorf("config %s: key %s: a glob kept read-only inside a writable root (%s) is not something agentbox can do; name the paths, or \"dir/**\" for a directory", cfg.Path, r.Key, base)
				}
				continue
			}
			if inRoot {
				out[base] = fmt.Sprintf("%s = \"read\" in %s", strings.TrimPrefix(r.Key, "permissions."), cfg.Path)
			}
		}
	}
	return out, nil
}
