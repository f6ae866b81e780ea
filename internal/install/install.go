// Package install writes agentbox into the configuration of the coding
// agents people use (Claude Code, Codex, Gemini CLI, Cursor) and takes it
// out again.
//
// Each agent gets agentbox's MCP server, and where the agent has a setting
// for it, its own shell tool turned off or routed through agentbox. Files
// are merged as text: what the user wrote stays byte for byte, a backup of
// the previous file is left beside it (FILE.agentbox-backup), and
// uninstall removes exactly what install added.
//
// [Plan] is pure: it takes the current files and returns the new ones.
// [Apply] writes them (temporary file and rename, the old mode kept).
package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Agents are the agents install knows, in the order help lists them.
var Agents = []string{"claude", "codex", "gemini", "cursor"}

// Scope says whose configuration is changed.
type Scope string

const (
	// User is the configuration in the user's home, for every project.
	User Scope = "user"
	// Project is the configuration inside one project's directory.
	Project Scope = "project"
)

// Options says what to install or uninstall, and where.
type Options struct {
	Agent string
	Scope Scope
	// Home is the user's home directory; Project the project's
	// directory (for Scope Project). Both absolute.
	Home, Project string
	// Command is the agentbox program the agent is to run: absolute,
	// or a name the agent finds on its PATH.
	Command string
	// Getenv reads the environment (CODEX_HOME); nil reads none.
	Getenv func(string) string
}

// Change is one file's new contents.
type Change struct {
	Path string
	// Old is the file as it is (nil: it does not exist); New what it
	// becomes (nil: it is removed).
	Old, New []byte
	// Note says what the change is, for the user.
	Note string
	// Backup is the backup file Apply writes Old into ("" for none).
	Backup string
}

// BackupSuffix names the backup of a file beside it.
const BackupSuffix = ".agentbox-backup"

// ReadFunc reads a file; a missing one is an error satisfying
// errors.Is(err, fs.ErrNotExist).
type ReadFunc func(path string) ([]byte, error)

// HookArgs are the arguments, after the program, of the Claude Code hook
// install writes.
var HookArgs = []string{"hook", "claude-pretooluse"}

// Plan returns the changes that install (or, with remove, uninstall) o
// would make, reading the current files with read. It writes nothing; an
// error means nothing may be written.
func Plan(o Options, remove bool, read ReadFunc) ([]Change, error) {
	if !slices.Contains(Agents, o.Agent) {
		return nil, fmt.Errorf("unknown agent %q (one of %s)", o.Agent, strings.Join(Agents, ", "))
	}
	switch o.Scope {
	case User, Project:
	default:
		return nil, fmt.Errorf("unknown scope %q (user or project)", o.Scope)
	}
	if o.Command == "" && !remove {
		return nil, errors.New("no agentbox command to write")
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	var edits []fileEdit
	switch o.Agent {
	case "claude":
		edits = claudeEdits(o)
	case "codex":
		edits = codexEdits(o)
	case "gemini":
		edits = geminiEdits(o)
	case "cursor":
		edits = cursorEdits(o)
	}
	var changes []Change
	for _, e := range edits {
		old, err := read(e.path)
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
		var backup []byte
		if remove {
			if b, err := read(e.path + BackupSuffix); err == nil {
				backup = b
			}
		}
		var nu []byte
		var note string
		if remove {
			if !exists {
				continue
			}
			nu, note, err = e.remove(old, backup)
		} else {
			nu, note, err = e.add(old)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w (nothing was changed)", e.path, err)
		}
		if exists && nu != nil && bytes.Equal(nu, old) {
			continue
		}
		if !exists && nu == nil {
			continue
		}
		c := Change{Path: e.path, New: nu, Note: note}
		if exists {
			c.Old = old
		}
		if exists && nu != nil {
			c.Backup = e.path + BackupSuffix
			// A reinstall keeps the backup of the file as it was
			// before agentbox first went in, which uninstall reads.
			if !remove && e.ours(old) {
				if _, err := read(c.Backup); err == nil {
					c.Backup = ""
				}
			}
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// fileEdit is what install does to one file.
type fileEdit struct {
	path string
	// add returns the file with agentbox in it (old nil: the file
	// does not exist yet).
	add func(old []byte) (nu []byte, note string, err error)
	// remove returns the file without agentbox (nil: remove the
	// file); backup is the file before install, nil if unknown.
	remove func(old, backup []byte) (nu []byte, note string, err error)
	// ours reports whether the file already holds agentbox's entries.
	ours func(old []byte) bool
}

// jsonEdit is a fileEdit for a JSON file: each op adds (and removes) one
// thing.
func jsonEdit(path string, comments bool, ops ...jsonOp) fileEdit {
	return fileEdit{
		path: path,
		add: func(old []byte) ([]byte, string, error) {
			d, err := newJDoc(old, comments)
			if err != nil {
				return nil, "", fmt.Errorf("cannot read it as JSON (%v): fix the file, or add agentbox by hand", err)
			}
			var notes []string
			for _, op := range ops {
				changed, err := op.add(d)
				if err != nil {
					return nil, "", err
				}
				if changed {
					notes = append(notes, op.what)
				}
			}
			out := d.src
			if old == nil && !bytes.HasSuffix(out, []byte("\n")) {
				out = append(out, '\n')
			}
			return out, "add " + strings.Join(notes, ", "), nil
		},
		remove: func(old, backup []byte) ([]byte, string, error) {
			d, err := newJDoc(old, comments)
			if err != nil {
				return nil, "", fmt.Errorf("cannot read it as JSON (%v): fix the file, or remove agentbox by hand", err)
			}
			var before *jdoc
			if backup != nil {
				before, _ = newJDoc(backup, comments)
			}
			var notes []string
			for _, op := range ops {
				if op.remove(d, before) {
					notes = append(notes, op.what)
				}
			}
			if len(notes) == 0 {
				return old, "", nil
			}
			if d.empty() && backup == nil {
				return nil, "remove the file (install created it)", nil
			}
			return d.src, "remove " + strings.Join(notes, ", "), nil
		},
		ours: func(old []byte) bool {
			root, err := parseJSON(old, comments)
			if err != nil {
				return false
			}
			for _, op := range ops {
				if op.present(old, root) {
					return true
				}
			}
			return false
		},
	}
}

// jsonOp is one entry in a JSON file.
type jsonOp struct {
	what string
	add  func(d *jdoc) (bool, error)
	// remove takes the entry out of d; before is the file before
	// install (its backup), nil when unknown.
	remove  func(d, before *jdoc) bool
	present func(src []byte, root *jnode) bool
}

// keeper says which containers uninstall leaves even when empty: those
// that were there before install. Without a backup, install made every
// empty one on agentbox's paths.
func keeper(before *jdoc) func(path []string) bool {
	return func(path []string) bool { return before != nil && before.root.lookup(path...) != nil }
}

// memberOp sets path to v (install) and deletes it (uninstall), or puts
// back the value it had before install.
func memberOp(what string, v any, path ...string) jsonOp {
	return jsonOp{
		what: what,
		add:  func(d *jdoc) (bool, error) { return d.setMember(path, v) },
		remove: func(d, before *jdoc) bool {
			if before != nil {
				if was := before.root.lookup(path...); was != nil {
					// The user's own entry of that name, which
					// install replaced: back as it was, byte for
					// byte.
					raw := before.src[was.start:was.end]
					cur := d.root.lookup(path...)
					if cur == nil || bytes.Equal(d.src[cur.start:cur.end], raw) {
						return false
					}
					d.splice(cur.start, cur.end, string(raw))
					return true
				}
			}
			return d.removeMember(path, keeper(before))
		},
		present: func(_ []byte, root *jnode) bool { return root.lookup(path...) != nil },
	}
}

// elemOp puts v in the array at path (install) and deletes the elements
// match says are agentbox's (uninstall), unless such an element was there
// before install: then it is the user's.
func elemOp(what string, v any, match func(raw []byte) bool, path ...string) jsonOp {
	present := func(src []byte, root *jnode) bool {
		n := root.lookup(path...)
		if n == nil {
			return false
		}
		for _, e := range n.elems {
			if match(src[e.start:e.end]) {
				return true
			}
		}
		return false
	}
	return jsonOp{
		what: what,
		add:  func(d *jdoc) (bool, error) { return d.appendElem(path, v, match) },
		remove: func(d, before *jdoc) bool {
			if before != nil && present(before.src, before.root) {
				return false
			}
			return d.removeElems(path, match, keeper(before))
		},
		present: present,
	}
}

// mcpServer is the entry of agentbox's MCP server in the mcpServers
// object Claude Code, Gemini CLI and Cursor share.
func mcpServer(command string, args ...string) ordered {
	return ordered{{"command", command}, {"args", append([]string{"mcp"}, args...)}}
}

func claudeEdits(o Options) []fileEdit {
	mcpFile := filepath.Join(o.Home, ".claude.json")
	settings := filepath.Join(o.Home, ".claude", "settings.json")
	if o.Scope == Project {
		mcpFile = filepath.Join(o.Project, ".mcp.json")
		settings = filepath.Join(o.Project, ".claude", "settings.json")
	}
	server := ordered{{"type", "stdio"}, {"command", o.Command}, {"args", []string{"mcp"}}}
	// The hook's own failure must block the command: Claude Code runs
	// the tool anyway after a hook exits with anything but 0 or 2 (a
	// moved binary is 127), so any failure becomes 2.
	hookCmd := shellQuote(o.Command) + " " + strings.Join(HookArgs, " ") + " || exit 2"
	hook := ordered{
		{"matcher", "Bash"},
		{"hooks", []ordered{{{"type", "command"}, {"command", hookCmd}}}},
	}
	return []fileEdit{
		jsonEdit(mcpFile, false, memberOp("the agentbox MCP server", server, "mcpServers", "agentbox")),
		jsonEdit(settings, false, refuseOp(func(d *jdoc) error {
			// The hook would be written and never run.
			if n := d.root.lookup("disableAllHooks"); n != nil && string(d.src[n.start:n.end]) == "true" {
				return errors.New(`it sets "disableAllHooks": true, which would keep the agentbox hook from running: remove that line and run again`)
			}
			return nil
		}), elemOp("a PreToolUse hook that runs every Bash command under agentbox", hook, isClaudeHook, "hooks", "PreToolUse")),
	}
}

// isClaudeHook reports whether a PreToolUse entry is the one install
// writes: a group whose hooks run agentbox's hook subcommand.
func isClaudeHook(raw []byte) bool {
	var g struct {
		Hooks []struct {
			Command string `json:"command"`
		} `json:"hooks"`
	}
	if json.Unmarshal(raw, &g) != nil {
		return false
	}
	for _, h := range g.Hooks {
		if strings.Contains(h.Command, " "+strings.Join(HookArgs, " ")) {
			return true
		}
	}
	return false
}

func codexEdits(o Options) []fileEdit {
	dir := filepath.Join(o.Home, ".codex")
	if h := o.Getenv("CODEX_HOME"); h != "" && o.Scope == User {
		dir = h
	}
	if o.Scope == Project {
		dir = filepath.Join(o.Project, ".codex")
	}
	path := filepath.Join(dir, "config.toml")
	return []fileEdit{{
		path: path,
		add: func(old []byte) ([]byte, string, error) {
			nu, err := codexAdd(old, o.Command, []string{"mcp"})
			return nu, "add [mcp_servers.agentbox] and features.shell_tool = false, features.unified_exec = false", err
		},
		remove: func(old, backup []byte) ([]byte, string, error) {
			nu, changed, err := codexStrip(old)
			if err != nil || !changed {
				return old, "", err
			}
			if len(nu) == 0 && backup == nil {
				return nil, "remove the file (install created it)", nil
			}
			return nu, "remove the agentbox block", nil
		},
		ours: func(old []byte) bool {
			_, changed, _ := codexStrip(old)
			return changed
		},
	}}
}

// geminiShell is the name of Gemini CLI's shell tool.
const geminiShell = "run_shell_command"

func geminiEdits(o Options) []fileEdit {
	path := filepath.Join(o.Home, ".gemini", "settings.json")
	if o.Scope == Project {
		path = filepath.Join(o.Project, ".gemini", "settings.json")
	}
	isShell := func(raw []byte) bool {
		var s string
		return json.Unmarshal(raw, &s) == nil && s == geminiShell
	}
	// Settings written in the first format (before v0.3) keep a
	// top-level excludeTools; the current one has tools.exclude.
	exclude := []string{"tools", "exclude"}
	edit := func(legacy bool) fileEdit {
		p := exclude
		if legacy {
			p = []string{"excludeTools"}
		}
		return jsonEdit(path, true,
			memberOp("the agentbox MCP server", mcpServer(o.Command), "mcpServers", "agentbox"),
			elemOp("run_shell_command in "+strings.Join(p, "."), geminiShell, isShell, p...))
	}
	modern, legacy := edit(false), edit(true)
	pick := func(old []byte) fileEdit {
		if root, err := parseJSON(old, true); err == nil && root.lookup("excludeTools") != nil {
			return legacy
		}
		return modern
	}
	// tools.exclude is deprecated (Gemini CLI 0.61 says so at start)
	// in favour of the policy engine: a deny rule in a policy file of
	// agentbox's own does the same, for versions that drop exclude.
	policy := ownedFile(filepath.Join(filepath.Dir(path), "policies", "agentbox.toml"), "gemini", geminiPolicy)
	return []fileEdit{{
		path:   path,
		add:    func(old []byte) ([]byte, string, error) { return pick(old).add(old) },
		remove: func(old, backup []byte) ([]byte, string, error) { return pick(old).remove(old, backup) },
		ours:   func(old []byte) bool { return pick(old).ours(old) },
	}, policy}
}

const geminiPolicy = `# Gemini CLI's own shell tool is off: commands go through agentbox's MCP
# "run" tool, which runs them in the sandbox.
[[rule]]
toolName = "run_shell_command"
decision = "deny"
priority = 999
`

// ownedFile is a fileEdit for a file agentbox writes whole (its first line
// says so): install writes it, uninstall removes it, and a file of that
// name that is not agentbox's is refused, never overwritten.
func ownedFile(path, agent, content string) fileEdit {
	marker := "# Written by `agentbox install " + agent + "`; `agentbox uninstall " + agent + "` removes this file.\n"
	ours := func(old []byte) bool { return bytes.HasPrefix(old, []byte(marker)) }
	return fileEdit{
		path: path,
		add: func(old []byte) ([]byte, string, error) {
			if old != nil && !ours(old) {
				return nil, "", errors.New("it exists and was not written by agentbox install: remove or rename it and run again")
			}
			return []byte(marker + content), "write agentbox's file", nil
		},
		remove: func(old, _ []byte) ([]byte, string, error) {
			if !ours(old) {
				return old, "", nil
			}
			return nil, "remove agentbox's file", nil
		},
		ours: ours,
	}
}

func cursorEdits(o Options) []fileEdit {
	path := filepath.Join(o.Home, ".cursor", "mcp.json")
	if o.Scope == Project {
		path = filepath.Join(o.Project, ".cursor", "mcp.json")
	}
	// A global server is not necessarily started in the project;
	// ${workspaceFolder} is Cursor's variable for the open folder.
	server := mcpServer(o.Command, "-C", "${workspaceFolder}")
	hooks := filepath.Join(filepath.Dir(path), "hooks.json")
	// Cursor's agent shell has no off switch in its settings; its
	// beforeShellExecution hook can refuse every command, pointing the
	// model at agentbox's run tool. Failures block too (|| exit 2).
	hook := ordered{{"command", shellQuote(o.Command) + " " + strings.Join(CursorHookArgs, " ") + " || exit 2"}}
	return []fileEdit{
		jsonEdit(path, true, memberOp("the agentbox MCP server", server, "mcpServers", "agentbox")),
		jsonEdit(hooks, true,
			ensureOp("version", 1, "version"),
			elemOp("a beforeShellExecution hook that refuses Cursor's own shell", hook, isHook(CursorHookArgs), "hooks", "beforeShellExecution")),
	}
}

// CursorHookArgs are the arguments, after the program, of the Cursor hook
// install writes.
var CursorHookArgs = []string{"hook", "cursor-beforeshell"}

// isHook reports whether a hook entry (one with a command, as Cursor
// writes them) runs agentbox's hook subcommand args.
func isHook(args []string) func(raw []byte) bool {
	return func(raw []byte) bool {
		var h struct {
			Command string `json:"command"`
		}
		return json.Unmarshal(raw, &h) == nil && strings.Contains(h.Command, " "+strings.Join(args, " "))
	}
}

// refuseOp changes nothing; its check fails the install when the file
// says something that would undo it.
func refuseOp(check func(d *jdoc) error) jsonOp {
	return jsonOp{
		add:     func(d *jdoc) (bool, error) { return false, check(d) },
		remove:  func(d, before *jdoc) bool { return false },
		present: func([]byte, *jnode) bool { return false },
	}
}

// ensureOp sets path to v when it is missing (install), and deletes it
// when install added it (uninstall).
func ensureOp(what string, v any, path ...string) jsonOp {
	op := memberOp(what, v, path...)
	op.add = func(d *jdoc) (bool, error) {
		if d.root.lookup(path...) != nil {
			return false, nil
		}
		return d.setMember(path, v)
	}
	// Only agentbox's own entries say the file holds agentbox.
	op.present = func([]byte, *jnode) bool { return false }
	return op
}

// shellQuote quotes s for a POSIX shell: as is when it is plainly safe,
// else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Apply makes the changes: for each, the backup first, then the new file
// through a temporary file renamed over the old one (keeping its mode), or
// the file's removal.
func Apply(changes []Change) error {
	for _, c := range changes {
		if err := apply(c); err != nil {
			return err
		}
	}
	return nil
}

func apply(c Change) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(c.Path); err == nil {
		mode = fi.Mode().Perm()
	}
	if c.Backup != "" && c.Old != nil {
		// The backup's name is replaced, never followed: a symlink
		// planted there (a checkout's FILE.agentbox-backup pointing at
		// ~/.bashrc) must not get the old file written through it.
		if err := writeAtomic(c.Backup, c.Old, mode, false); err != nil {
			return fmt.Errorf("backup of %s: %w", c.Path, err)
		}
	}
	if c.New == nil {
		// Only a file install created goes: all it held was agentbox's.
		if err := os.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if c.Old == nil {
		// A new file: a stale backup beside it would tell uninstall
		// the file was there before.
		if err := os.Remove(c.Path + BackupSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(c.Path), 0o755); err != nil {
			return err
		}
	}
	return writeAtomic(c.Path, c.New, mode, true)
}

// writeAtomic replaces path with data: readers see the old file or the new
// one, never a part. With follow, a symlink at path (dotfiles kept in a
// repository) has the file it points to replaced.
func writeAtomic(path string, data []byte, mode fs.FileMode, follow bool) error {
	if real, err := filepath.EvalSymlinks(path); err == nil && follow {
		path = real
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".agentbox-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename: nothing there
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Confined checks that every file of changes is inside root once symlinks
// are resolved: a project's configuration (--scope project) is the
// project's, and a checkout whose .mcp.json is a symlink to a file of the
// user's must not get that file edited.
func Confined(root string, changes []Change) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	for _, c := range changes {
		for _, p := range []string{c.Path, c.Backup} {
			if p == "" {
				continue
			}
			real, err := resolveExisting(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(realRoot, real)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
				return fmt.Errorf("%s resolves to %s, outside the project %s: remove the symlink, or install with --scope user", p, real, root)
			}
		}
	}
	return nil
}

// resolveExisting is path with symlinks resolved as far as it exists: the
// deepest existing ancestor resolved, the rest appended.
func resolveExisting(path string) (string, error) {
	rest := ""
	p := path
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		// A dangling symlink counts as where it points.
		if target, lerr := os.Readlink(p); lerr == nil {
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			return resolveExisting(filepath.Join(target, rest))
		}
		parent := filepath.Dir(p)
		if parent == p {
			return path, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
