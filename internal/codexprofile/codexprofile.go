// Package codexprofile reads Codex's permission-profile language
// (default_permissions and [permissions.NAME]) and translates the selected
// profile into the terms of agentbox's policy: a mode, writable roots,
// paths kept read-only inside them, paths hidden and re-opened, and the
// network. It is pure: paths stay as written, anchored at the home, the
// workspace roots or the temp directories, and package policy resolves
// them for one command.
//
// # The language
//
// As Codex documents it (its "Permissions" page and config reference):
//
//	default_permissions = "project-edit"        # or ":read-only", ":workspace", ":danger-full-access"
//	[permissions.project-edit]
//	description = "..."                          # ignored
//	extends = ":workspace"                      # a built-in (not :danger-full-access) or another profile
//	[permissions.project-edit.workspace_roots]
//	"~/code/lib" = true                          # further workspace roots
//	[permissions.project-edit.filesystem]
//	glob_scan_max_depth = 3
//	":root" = "read"
//	":project_roots" = { "." = "write", "**/*.env" = "none" }
//	"~/.cache/tool" = "write"
//	"/abs/secrets" = "deny"
//	[permissions.project-edit.network]
//	enabled = true
//	domains = { "api.example.com" = "allow", "**.corp.example" = "deny" }
//
// Access values are "read", "write" and "none" (Codex's later spelling
// "deny" is the same). Special paths: ":root" (everything), ":minimal"
// (what the platform needs to run a program), ":workspace_roots" (also
// spelt ":project_roots" and, before that, ":cwd": the workspace and the
// profile's workspace_roots), ":tmpdir" ($TMPDIR) and ":slash_tmp" (/tmp).
// A table under a path scopes its keys below it ("." is the path itself).
//
// # What agentbox makes of it
//
// agentbox reads everywhere except what it hides, so "read" grants
// nothing new: it keeps a path read-only where it lies inside a writable
// one, and re-opens a path inside one of the profile's own "none"
// entries. A profile that leaves ":root" out still reads everywhere (the
// README says so); one that asks to hide ":root" or ":minimal", to write
// everything, to write a glob, or to write somewhere while the workspace
// itself stays read-only cannot be expressed and is an error, as is every
// key or value this package does not know.
package codexprofile

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/spelling"
)

// Built-in profile names.
const (
	ReadOnly         = ":read-only"
	Workspace        = ":workspace"
	DangerFullAccess = ":danger-full-access"
)

// Anchor says what a [Ref]'s path is relative to.
type Anchor int

const (
	// Abs: Path is an absolute path (or pattern).
	Abs Anchor = iota
	// Home: Path is relative to the user's home ("" = the home).
	Home
	// WorkspaceRoots: Path is relative to each workspace root: the
	// workspace (the command's directory) and the profile's
	// workspace_roots.
	WorkspaceRoots
	// Tmpdir: Path is relative to $TMPDIR (%TEMP%).
	Tmpdir
	// SlashTmp: Path is relative to /tmp.
	SlashTmp
)

// Ref is one path or glob of a profile.
type Ref struct {
	Anchor Anchor
	// Path is a slash path: absolute for Abs, relative (no "..", ""
	// for the anchor itself) otherwise. It may hold glob syntax.
	Path string
	// Key is the entry as written, for messages:
	// permissions.NAME.filesystem.":project_roots"."**/*.env".
	Key string
}

// IsGlob reports whether the path holds glob syntax.
func (r Ref) IsGlob() bool { return hasMeta(r.Path) }

// Under is the path below dir, an absolute slash or OS path that stands
// for the anchor (Abs ignores dir).
func (r Ref) Under(dir string) string {
	if r.Anchor == Abs {
		return r.Path
	}
	if r.Path == "" {
		return dir
	}
	sep := "/"
	if strings.Contains(dir, `\`) && !strings.Contains(dir, "/") {
		sep = `\`
		return strings.TrimRight(dir, `\`) + sep + strings.ReplaceAll(r.Path, "/", sep)
	}
	return strings.TrimRight(dir, "/") + sep + r.Path
}

// Plan is a profile in agentbox's terms.
type Plan struct {
	// Name is the profile's name as default_permissions gave it.
	Name string
	// Mode is "read-only", "workspace-write" or "danger-full-access".
	Mode string
	// WorkspaceRoots are the profile's further workspace roots (Abs or
	// Home): writable in workspace-write, and WorkspaceRoots-anchored
	// entries apply below them too.
	WorkspaceRoots []Ref
	// WritableRoots are further writable directories (no globs).
	WritableRoots []Ref
	// ReadOnly are "read" entries that must stay read-only where they
	// lie inside a writable root (a glob among them is an error there).
	ReadOnly []Ref
	// DenyRead are the "none" entries: paths and globs to hide.
	DenyRead []Ref
	// AllowRead are "read" entries inside one of the profile's own
	// "none" entries: re-opened (no globs).
	AllowRead []Ref
	// Tmpdir and SlashTmp: $TMPDIR and /tmp are writable.
	Tmpdir, SlashTmp bool
	// GlobScanMaxDepth is glob_scan_max_depth; 0 = not set.
	GlobScanMaxDepth int
	// AllowGitWrites is filesystem.allow_limited_git_writes, nil = not set.
	AllowGitWrites *bool
	Network        Network
}

// Network is a profile's network table in agentbox's terms.
type Network struct {
	// On: the network is fully on (enabled = true with no allow-list,
	// or a "*" = "allow" domain).
	On bool
	// Allowed and Denied are agentbox allow-list patterns (Codex's
	// "**.example.com" becomes "example.com" and "*.example.com").
	// Allowed is empty unless enabled = true.
	Allowed, Denied []string
	// AllowLocalBinding is allow_local_binding, nil = not set.
	AllowLocalBinding *bool
	// UnixSockets are the unix_sockets paths set to "allow".
	UnixSockets []string
}

// Uses reports whether a config uses the profile language at all.
func Uses(defaultPermissions *string, permissions map[string]any) bool {
	return defaultPermissions != nil || permissions != nil
}

// Resolve checks every profile of permissions (the [permissions] table
// as decoded) and translates the one defaultPermissions names. It
// returns nil, nil when defaultPermissions is nil: profiles that are
// defined but not selected have no effect, as in Codex.
func Resolve(defaultPermissions *string, permissions map[string]any) (*Plan, error) {
	names := sortedKeys(permissions)
	for _, n := range names {
		if strings.HasPrefix(n, ":") {
			return nil, fmt.Errorf("key permissions.%s: a profile's name cannot start with \":\" (those are the built-ins %s, %s, %s)", quoteKey(n), ReadOnly, Workspace, DangerFullAccess)
		}
		if _, ok := permissions[n].(map[string]any); !ok {
			return nil, fmt.Errorf("key permissions.%s: want a table ([permissions.%s]), got %s", quoteKey(n), quoteKey(n), describe(permissions[n]))
		}
	}
	// Every profile is checked, selected or not: an error should show
	// when the file is written, not the day the profile is selected.
	plans := map[string]*Plan{}
	for _, n := range names {
		merged, err := resolveProfile(n, permissions, nil)
		if err != nil {
			return nil, err
		}
		pl, err := translate(n, merged)
		if err != nil {
			return nil, err
		}
		plans[n] = pl
	}
	if defaultPermissions == nil {
		return nil, nil
	}
	name := *defaultPermissions
	switch name {
	case DangerFullAccess:
		return &Plan{Name: name, Mode: "danger-full-access"}, nil
	case ReadOnly, Workspace:
		return translate(name, builtin(name))
	}
	if pl := plans[name]; pl != nil {
		return pl, nil
	}
	choices := append([]string{ReadOnly, Workspace, DangerFullAccess}, names...)
	if near := spelling.Nearest(name, choices); near != "" {
		return nil, fmt.Errorf("key default_permissions: no profile %q (did you mean %q?)", name, near)
	}
	return nil, fmt.Errorf("key default_permissions: no profile %q: define [permissions.%s] or name a built-in (%s, %s, %s)", name, quoteKey(name), ReadOnly, Workspace, DangerFullAccess)
}

// builtin is the TOML shape of a built-in profile, as Codex defines it:
// :read-only reads everything; :workspace also writes the workspace
// roots and the temp directories.
func builtin(name string) map[string]any {
	switch name {
	case ReadOnly:
		return map[string]any{
			"filesystem": map[string]any{":root": "read"},
			"network":    map[string]any{"enabled": false},
		}
	case Workspace:
		return map[string]any{
			"filesystem": map[string]any{
				":root":            "read",
				":workspace_roots": map[string]any{".": "write"},
				":tmpdir":          "write",
				":slash_tmp":       "write",
			},
			"network": map[string]any{"enabled": false},
		}
	}
	return nil
}

var profileKeys = []string{"description", "extends", "filesystem", "network", "workspace_roots"}

// resolveProfile is profile name with its extends chain merged in:
// parent first, the child's keys over it.
func resolveProfile(name string, all map[string]any, seen []string) (map[string]any, error) {
	if slices.Contains(seen, name) {
		return nil, fmt.Errorf("key permissions.%s.extends: a cycle (%s)", quoteKey(seen[0]), strings.Join(append(seen, name), " -> "))
	}
	seen = append(seen, name)
	raw := all[name].(map[string]any)
	for _, k := range sortedKeys(raw) {
		if !slices.Contains(profileKeys, k) {
			return nil, unknownKey("permissions."+quoteKey(name), k, profileKeys)
		}
	}
	prof, err := canonical(name, raw)
	if err != nil {
		return nil, err
	}
	ext, ok := raw["extends"]
	if !ok {
		return prof, nil
	}
	parent, ok := ext.(string)
	if !ok {
		return nil, fmt.Errorf("key permissions.%s.extends: want a string, got %s", quoteKey(name), describe(ext))
	}
	var base map[string]any
	switch parent {
	case ReadOnly, Workspace:
		base = builtin(parent)
	case DangerFullAccess:
		return nil, fmt.Errorf("key permissions.%s.extends: %s cannot be extended (it has no sandbox to add to); select it with default_permissions instead", quoteKey(name), parent)
	default:
		p, ok := all[parent]
		if !ok {
			return nil, fmt.Errorf("key permissions.%s.extends: no profile %q to extend (define [permissions.%s] or name %s or %s)", quoteKey(name), parent, quoteKey(parent), ReadOnly, Workspace)
		}
		if _, ok := p.(map[string]any); !ok {
			return nil, fmt.Errorf("key permissions.%s: want a table", quoteKey(parent))
		}
		base, err = resolveProfile(parent, all, seen)
		if err != nil {
			return nil, err
		}
	}
	base, err = canonical(parent, base)
	if err != nil {
		return nil, err
	}
	merged := merge(base, prof)
	if sp, ok := prof[speltKey]; ok {
		merged[speltKey] = sp
	}
	// The description is the profile's own (Codex does not inherit it).
	delete(merged, "description")
	delete(merged, "extends")
	return merged, nil
}

// canonical copies a profile with the workspace-root spellings of its
// filesystem table made one (":workspace_roots"), so that a parent's
// ":project_roots" and a child's ":workspace_roots" merge.
func canonical(name string, prof map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range prof {
		out[k] = v
	}
	fs, ok := prof["filesystem"].(map[string]any)
	if !ok {
		return out, nil
	}
	nfs := map[string]any{}
	var spelt []string
	for _, k := range sortedKeys(fs) {
		v := fs[k]
		if !isWorkspaceRoots(k) {
			nfs[k] = v
			continue
		}
		spelt = append(spelt, k)
		prev, had := nfs[":workspace_roots"]
		if !had {
			nfs[":workspace_roots"] = v
			continue
		}
		// Two spellings in one table: their entries must not disagree.
		a, b := asScoped(prev), asScoped(v)
		for sk, sv := range b {
			if av, ok := a[sk]; ok && av != sv {
				return nil, fmt.Errorf("key permissions.%s.filesystem: %s sets %q to %v and %s to %v; they are one path, keep one spelling", quoteKey(name), quoteKey(spelt[0]), sk, av, quoteKey(k), sv)
			}
			a[sk] = sv
		}
		nfs[":workspace_roots"] = a
	}
	out["filesystem"] = nfs
	if len(spelt) > 0 {
		out[speltKey] = spelt[0]
	}
	return out, nil
}

// speltKey holds, in a canonical profile, how the file spelt
// ":workspace_roots", so that messages quote the key as written. A
// profile of the file cannot have this key (its keys are checked
// first).
const speltKey = "\x00workspace_roots"

func isWorkspaceRoots(k string) bool {
	return k == ":workspace_roots" || k == ":project_roots" || k == ":cwd"
}

// asScoped is a filesystem value as a table: a bare access is the
// path itself (".").
func asScoped(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		out := map[string]any{}
		for k, x := range m {
			out[k] = x
		}
		return out
	}
	return map[string]any{".": v}
}

// merge lays child over parent: tables merge key by key, anything else
// is replaced.
func merge(parent, child map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range parent {
		out[k] = v
	}
	for k, v := range child {
		pm, pok := out[k].(map[string]any)
		cm, cok := v.(map[string]any)
		if pok && cok {
			out[k] = merge(pm, cm)
			continue
		}
		out[k] = v
	}
	return out
}

// Access is a filesystem entry's value.
type Access string

const (
	Read  Access = "read"
	Write Access = "write"
	None  Access = "none"
)

func parseAccess(v any, key string) (Access, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("key %s: want \"read\", \"write\" or \"none\" (or a table of them), got %s", key, describe(v))
	}
	switch s {
	case "read", "write", "none":
		return Access(s), nil
	case "deny":
		return None, nil
	}
	return "", fmt.Errorf("key %s: unknown access %q (want \"read\", \"write\" or \"none\"; \"deny\" is \"none\")", key, s)
}

type entry struct {
	ref    Ref
	access Access
	// special is ":root" or ":minimal" for those entries (ref unused).
	special string
}

// translate turns a merged profile into a Plan.
func translate(name string, prof map[string]any) (*Plan, error) {
	pfx := "permissions." + quoteKey(name)
	pl := &Plan{Name: name}
	var entries []entry
	if v, ok := prof["filesystem"]; ok {
		fs, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %s.filesystem: want a table, got %s", pfx, describe(v))
		}
		var err error
		spelt, _ := prof[speltKey].(string)
		entries, err = filesystemEntries(pfx+".filesystem", fs, spelt, pl)
		if err != nil {
			return nil, err
		}
	}
	if v, ok := prof["workspace_roots"]; ok {
		wr, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %s.workspace_roots: want a table of paths = true, got %s", pfx, describe(v))
		}
		for _, k := range sortedKeys(wr) {
			key := pfx + ".workspace_roots." + quoteKey(k)
			on, ok := wr[k].(bool)
			if !ok {
				return nil, fmt.Errorf("key %s: want a boolean, got %s", key, describe(wr[k]))
			}
			if !on {
				continue
			}
			r, err := topRef(k, key)
			if err != nil {
				return nil, err
			}
			if r.Anchor != Abs && r.Anchor != Home || r.IsGlob() {
				return nil, fmt.Errorf("key %s: a workspace root is an absolute path or one under ~", key)
			}
			pl.WorkspaceRoots = append(pl.WorkspaceRoots, r)
		}
	}
	if err := classify(pfx, entries, pl); err != nil {
		return nil, err
	}
	if v, ok := prof["network"]; ok {
		n, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %s.network: want a table, got %s", pfx, describe(v))
		}
		net, err := network(pfx+".network", n)
		if err != nil {
			return nil, err
		}
		pl.Network = net
	}
	if d, ok := prof["description"]; ok {
		if _, ok := d.(string); !ok {
			return nil, fmt.Errorf("key %s.description: want a string, got %s", pfx, describe(d))
		}
	}
	return pl, nil
}

// filesystemEntries reads a [permissions.NAME.filesystem] table.
func filesystemEntries(pfx string, fs map[string]any, spelt string, pl *Plan) ([]entry, error) {
	var out []entry
	for _, k := range sortedKeys(fs) {
		v := fs[k]
		key := pfx + "." + quoteKey(k)
		if k == ":workspace_roots" && spelt != "" {
			key = pfx + "." + quoteKey(spelt)
		}
		switch k {
		case "glob_scan_max_depth":
			n, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf("key %s: want an integer, got %s", key, describe(v))
			}
			if n < 1 || n > 1024 {
				return nil, fmt.Errorf("key %s: %d is out of range (1 to 1024)", key, n)
			}
			pl.GlobScanMaxDepth = int(n)
			continue
		case "allow_limited_git_writes":
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("key %s: want a boolean, got %s", key, describe(v))
			}
			pl.AllowGitWrites = &b
			continue
		}
		if k == ":root" || k == ":minimal" {
			if _, ok := v.(map[string]any); ok && k == ":minimal" {
				return nil, fmt.Errorf("key %s: :minimal takes an access, not a table", key)
			}
		}
		if k == ":root" {
			if m, ok := v.(map[string]any); ok {
				// Scoped below "/".
				es, err := scoped(key, m, func(sub, skey string, a Access) entry {
					if sub == "" {
						return entry{special: ":root", access: a, ref: Ref{Key: skey}}
					}
					return entry{ref: Ref{Anchor: Abs, Path: "/" + sub, Key: skey}, access: a}
				})
				if err != nil {
					return nil, err
				}
				out = append(out, es...)
				continue
			}
		}
		if k == ":root" || k == ":minimal" {
			a, err := parseAccess(v, key)
			if err != nil {
				return nil, err
			}
			out = append(out, entry{special: k, access: a, ref: Ref{Key: key}})
			continue
		}
		base, err := topRef(k, key)
		if err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			if base.IsGlob() {
				return nil, fmt.Errorf("key %s: a table scopes entries below a path, not below a glob", key)
			}
			es, err := scoped(key, m, func(sub, skey string, a Access) entry {
				r := base
				r.Key = skey
				if sub != "" {
					if r.Path == "" || strings.HasSuffix(r.Path, "/") {
						r.Path += sub
					} else {
						r.Path += "/" + sub
					}
				}
				return entry{ref: r, access: a}
			})
			if err != nil {
				return nil, err
			}
			out = append(out, es...)
			continue
		}
		a, err := parseAccess(v, key)
		if err != nil {
			return nil, err
		}
		out = append(out, entry{ref: base, access: a})
	}
	return out, nil
}

// scoped reads m, the table at key that scopes accesses below a path:
// each of its keys is a path relative to that one (sub, "" for the path
// itself), which at makes an entry of.
func scoped(key string, m map[string]any, at func(sub, skey string, a Access) entry) ([]entry, error) {
	var out []entry
	for _, sk := range sortedKeys(m) {
		skey := key + "." + quoteKey(sk)
		sub, err := subPath(sk, skey)
		if err != nil {
			return nil, err
		}
		a, err := parseAccess(m[sk], skey)
		if err != nil {
			return nil, err
		}
		out = append(out, at(sub, skey, a))
	}
	return out, nil
}

var specials = []string{":root", ":minimal", ":workspace_roots", ":project_roots", ":tmpdir", ":slash_tmp"}

// topRef reads a filesystem table's key: a special path, an absolute
// path, or one under ~.
func topRef(k, key string) (Ref, error) {
	r := Ref{Key: key}
	switch {
	case isWorkspaceRoots(k):
		r.Anchor = WorkspaceRoots
	case k == ":tmpdir":
		r.Anchor = Tmpdir
	case k == ":slash_tmp":
		r.Anchor = SlashTmp
	case strings.HasPrefix(k, ":"):
		if near := spelling.Nearest(k, specials); near != "" {
			return r, fmt.Errorf("key %s: unknown special path %s (did you mean %s?)", key, k, near)
		}
		return r, fmt.Errorf("key %s: unknown special path %s (agentbox knows %s)", key, k, strings.Join(specials, ", "))
	case k == "~":
		r.Anchor = Home
	case strings.HasPrefix(k, "~/") || strings.HasPrefix(k, `~\`):
		sub, err := subPath(k[2:], key)
		if err != nil {
			return r, err
		}
		r.Anchor, r.Path = Home, sub
	case strings.HasPrefix(k, "~"):
		return r, fmt.Errorf("key %s: only ~ (your home) is understood, not ~user", key)
	case isAbs(k):
		if err := checkPattern(k, key); err != nil {
			return r, err
		}
		for _, el := range strings.Split(strings.ReplaceAll(k, `\`, "/"), "/") {
			if el == ".." {
				return r, fmt.Errorf("key %s: %q has a \"..\"; write the path it means", key, k)
			}
		}
		r.Anchor, r.Path = Abs, k
	default:
		return r, fmt.Errorf("key %s: %q is not an absolute path, a path under ~ or a special path (%s)", key, k, strings.Join(specials, ", "))
	}
	return r, nil
}

// subPath checks a relative key below a scoping path; "." is the path
// itself ("").
func subPath(s, key string) (string, error) {
	s = strings.ReplaceAll(s, `\`, "/")
	if s == "" || strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("key %s: %q is not a path", key, s)
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") || isAbs(s) {
		return "", fmt.Errorf("key %s: %q inside a table is relative to the table's path; write it without the leading %q", key, s, s[:1])
	}
	var els []string
	for _, el := range strings.Split(s, "/") {
		switch el {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("key %s: %q leaves the path it is scoped to", key, s)
		}
		els = append(els, el)
	}
	out := strings.Join(els, "/")
	if err := checkPattern(out, key); err != nil {
		return "", err
	}
	return out, nil
}

// checkPattern refuses glob syntax agentbox would read differently from
// Codex: a brace list would be taken literally, and match nothing.
func checkPattern(p, key string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("key %s: brace alternatives ({a,b}) are not supported; write one entry for each", key)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "**" || !hasMeta(el) {
			continue
		}
		if strings.Contains(el, "**") {
			return fmt.Errorf("key %s: \"**\" must be a whole path element (as in **/*.env)", key)
		}
		if _, err := path.Match(el, ""); err != nil {
			return fmt.Errorf("key %s: bad pattern %q: %w", key, p, err)
		}
	}
	return nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// isAbs accepts Unix and Windows absolute paths whatever the GOOS, so
// that one config file is read alike everywhere.
func isAbs(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		(p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z')
}

// classify sorts the entries into the plan and decides the mode.
func classify(pfx string, entries []entry, pl *Plan) error {
	projWrite := false
	var reads []entry
	for _, e := range entries {
		switch e.special {
		case ":root":
			switch e.access {
			case Write:
				return fmt.Errorf("key %s: \":root\" = \"write\" would make every directory writable, which agentbox does not do inside a sandbox; name the directories, or select %s", e.ref.Key, DangerFullAccess)
			case None:
				return fmt.Errorf("key %s: hiding \":root\" and re-opening a few paths is a read allow-list, which agentbox does not have (it reads everywhere except what it hides); hide the paths you mean with \"none\" entries instead", e.ref.Key)
			}
			continue
		case ":minimal":
			if e.access != Read {
				return fmt.Errorf("key %s: \":minimal\" (what every program needs to start) can only be \"read\"", e.ref.Key)
			}
			continue
		}
		r := e.ref
		whole := r.Path == "" && r.Anchor != Home
		switch e.access {
		case Write:
			if r.IsGlob() {
				return fmt.Errorf("key %s: a glob cannot be writable in agentbox; name the directories", r.Key)
			}
			switch {
			case whole && r.Anchor == WorkspaceRoots:
				projWrite = true
			case whole && r.Anchor == Tmpdir:
				pl.Tmpdir = true
			case whole && r.Anchor == SlashTmp:
				pl.SlashTmp = true
			case r.Anchor == Abs && (r.Path == "/" || r.Path == `\`):
				return fmt.Errorf("key %s: \"/\" cannot be a writable root; name the directories, or select %s", r.Key, DangerFullAccess)
			default:
				pl.WritableRoots = append(pl.WritableRoots, r)
			}
		case None:
			if whole && r.Anchor == WorkspaceRoots {
				return fmt.Errorf("key %s: hiding the workspace itself leaves the command nothing to work on; hide the paths inside it", r.Key)
			}
			pl.DenyRead = append(pl.DenyRead, r)
		case Read:
			reads = append(reads, e)
		}
	}
	// A "read" inside one of the profile's own "none" entries re-opens
	// it (Codex lets the more specific entry win); any other "read"
	// keeps its path read-only where a writable root holds it.
	for _, e := range reads {
		r := e.ref
		if r.Path == "" && r.Anchor != Home && r.Anchor != Abs {
			continue // the workspace, $TMPDIR or /tmp: read-only unless written
		}
		if slices.ContainsFunc(pl.DenyRead, func(d Ref) bool { return inside(r, d) }) {
			if r.IsGlob() {
				return fmt.Errorf("key %s: a glob cannot re-open part of a hidden path; name each path", r.Key)
			}
			pl.AllowRead = append(pl.AllowRead, r)
			continue
		}
		// "dir/**" is dir's tree: keep dir read-only.
		if p, ok := strings.CutSuffix(r.Path, "/**"); ok && !hasMeta(p) {
			r.Path = p
		}
		pl.ReadOnly = append(pl.ReadOnly, r)
	}
	writes := projWrite || pl.Tmpdir || pl.SlashTmp || len(pl.WritableRoots) > 0
	switch {
	case projWrite:
		pl.Mode = "workspace-write"
	case writes:
		what := ":tmpdir or :slash_tmp"
		if len(pl.WritableRoots) > 0 {
			what = pl.WritableRoots[0].Key
		}
		return fmt.Errorf("key %s.filesystem: %s is writable but the workspace is not; agentbox's writable mode always includes the workspace: add \":workspace_roots\" = { \".\" = \"write\" }, or drop the writes for a read-only profile", pfx, what)
	default:
		pl.Mode = "read-only"
	}
	return nil
}

// inside reports whether r names a path at or below one d matches,
// both on the same anchor.
func inside(r, d Ref) bool {
	if r.Anchor != d.Anchor {
		return false
	}
	if !hasMeta(d.Path) {
		return r.Path == d.Path || d.Path == "" || strings.HasPrefix(r.Path, strings.TrimSuffix(d.Path, "/")+"/")
	}
	els := strings.Split(r.Path, "/")
	for i := range els {
		if MatchPath(d.Path, strings.Join(els[:i+1], "/")) {
			return true
		}
	}
	return false
}

// MatchPath reports whether the slash path name matches the slash
// pattern: "*", "?" and "[...]" within one element (a leading dot
// included), "**" any number of elements.
func MatchPath(pattern, name string) bool {
	return matchEls(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchEls(p, n []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			for i := 0; i <= len(n); i++ {
				if matchEls(p[1:], n[i:]) {
					return true
				}
			}
			return false
		}
		if len(n) == 0 {
			return false
		}
		if ok, _ := path.Match(p[0], n[0]); !ok {
			return false
		}
		p, n = p[1:], n[1:]
	}
	return len(n) == 0
}

// networkKeys are the keys of a profile's network table. Those that
// configure Codex's own proxy listener (its addresses, SOCKS5, upstream
// proxies, MITM hooks) are accepted and have no effect: agentbox runs
// its own proxy.
var networkKeys = []string{
	"enabled", "mode", "domains", "unix_sockets", "allow_local_binding",
	"dangerously_allow_all_unix_sockets",
	"proxy_url", "admin_url", "enable_socks5", "socks_url", "enable_socks5_udp",
	"allow_upstream_proxy", "dangerously_allow_non_loopback_proxy",
	"dangerously_allow_non_loopback_admin", "mitm",
}

func network(pfx string, n map[string]any) (Network, error) {
	var out Network
	enabled := false
	for _, k := range sortedKeys(n) {
		v := n[k]
		key := pfx + "." + quoteKey(k)
		switch k {
		case "enabled", "enable_socks5", "enable_socks5_udp", "allow_upstream_proxy",
			"dangerously_allow_non_loopback_proxy", "dangerously_allow_non_loopback_admin",
			"allow_local_binding", "dangerously_allow_all_unix_sockets":
			b, ok := v.(bool)
			if !ok {
				return out, fmt.Errorf("key %s: want a boolean, got %s", key, describe(v))
			}
			switch k {
			case "enabled":
				enabled = b
			case "allow_local_binding":
				out.AllowLocalBinding = &b
			case "dangerously_allow_all_unix_sockets":
				if b {
					return out, fmt.Errorf("key %s: agentbox opens unix sockets one by one; list them under unix_sockets = { \"/path.sock\" = \"allow\" }", key)
				}
			}
		case "proxy_url", "admin_url", "socks_url":
			if _, ok := v.(string); !ok {
				return out, fmt.Errorf("key %s: want a string, got %s", key, describe(v))
			}
		case "mitm":
			if _, ok := v.(map[string]any); !ok {
				return out, fmt.Errorf("key %s: want a table, got %s", key, describe(v))
			}
		case "mode":
			s, ok := v.(string)
			if !ok {
				return out, fmt.Errorf("key %s: want a string, got %s", key, describe(v))
			}
			switch s {
			case "full":
			case "limited":
				return out, fmt.Errorf("key %s: \"limited\" (read-only HTTP methods) is not something agentbox's proxy can enforce on encrypted connections; use \"full\": the domains still limit where the command connects", key)
			default:
				return out, fmt.Errorf("key %s: unknown mode %q (want \"full\" or \"limited\")", key, s)
			}
		case "domains":
			m, ok := v.(map[string]any)
			if !ok {
				return out, fmt.Errorf("key %s: want a table of pattern = \"allow\" or \"deny\", got %s", key, describe(v))
			}
			for _, d := range sortedKeys(m) {
				dkey := key + "." + quoteKey(d)
				s, _ := m[d].(string)
				if s != "allow" && s != "deny" {
					return out, fmt.Errorf("key %s: want \"allow\" or \"deny\", got %s", dkey, describe(m[d]))
				}
				pats := []string{d}
				if rest, ok := strings.CutPrefix(d, "**."); ok {
					// Codex's "**.x" is x and every name below it.
					pats = []string{rest, "*." + rest}
				}
				if s == "allow" {
					out.Allowed = append(out.Allowed, pats...)
				} else {
					out.Denied = append(out.Denied, pats...)
				}
			}
		case "unix_sockets":
			m, ok := v.(map[string]any)
			if !ok {
				return out, fmt.Errorf("key %s: want a table of path = \"allow\" or \"none\", got %s", key, describe(v))
			}
			for _, p := range sortedKeys(m) {
				pkey := key + "." + quoteKey(p)
				s, _ := m[p].(string)
				switch s {
				case "allow":
					if !strings.HasPrefix(p, "/") {
						return out, fmt.Errorf("key %s: a socket is named by its absolute path", pkey)
					}
					out.UnixSockets = append(out.UnixSockets, p)
				case "none", "deny":
				default:
					return out, fmt.Errorf("key %s: want \"allow\" or \"none\", got %s", pkey, describe(m[p]))
				}
			}
		default:
			return out, unknownKey(pfx, k, networkKeys)
		}
	}
	if !enabled {
		// Codex: the network stays off, whatever the domains say.
		out.Allowed, out.Denied = nil, nil
		return out, nil
	}
	if slices.Contains(out.Allowed, "*") {
		if len(out.Denied) > 0 {
			return out, fmt.Errorf("key %s.domains: \"*\" = \"allow\" with denied domains is an allow-everything-but list, which agentbox's allow-list cannot express; list the hosts to allow", pfx)
		}
		if len(out.Allowed) > 1 {
			return out, fmt.Errorf("key %s.domains: \"*\" = \"allow\" allows everything; the other allowed domains add nothing: remove one or the other", pfx)
		}
		out.Allowed = nil
	}
	if len(out.Allowed) == 0 {
		if len(out.Denied) > 0 {
			return out, fmt.Errorf("key %s.domains: denied domains without allowed ones: agentbox refuses hosts only inside an allow-list; list the hosts to allow", pfx)
		}
		out.On = true
	}
	return out, nil
}

func unknownKey(table, k string, known []string) error {
	if near := spelling.Nearest(k, known); near != "" {
		return fmt.Errorf("unknown key %s.%s (did you mean %s?)", table, quoteKey(k), near)
	}
	return fmt.Errorf("unknown key %s.%s (known: %s)", table, quoteKey(k), strings.Join(known, ", "))
}

// quoteKey writes a key as TOML would need it in a dotted key.
func quoteKey(k string) string {
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("%q", k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

func describe(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("a %T", v)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ErrMixed is wrapped by [CheckMixed]'s error.
var ErrMixed = errors.New("two sandbox languages in one file")

// CheckMixed refuses a file that uses the profile language
// (default_permissions, [permissions]) and the older keys (sandbox_mode,
// [sandbox_workspace_write]) together: Codex then silently ignores the
// profile, and its users trip on it; agentbox does not guess. legacy
// names the older keys the file sets.
func CheckMixed(defaultPermissions *string, permissions map[string]any, legacy []string) error {
	if !Uses(defaultPermissions, permissions) || len(legacy) == 0 {
		return nil
	}
	var prof []string
	if defaultPermissions != nil {
		prof = append(prof, "default_permissions")
	}
	if permissions != nil {
		prof = append(prof, "[permissions]")
	}
	return fmt.Errorf("%w: %s (Codex's permission profiles) and %s in one file: Codex would silently use %s and ignore the profile; agentbox refuses to guess: keep one of them", ErrMixed, strings.Join(prof, " and "), strings.Join(legacy, " and "), strings.Join(legacy, " and "))
}
