// Package unelevated is agentbox's Windows backend that never needs
// administrator rights (`[windows] sandbox = "unelevated"`, the default).
//
// A command runs under a write-restricted token whose restricting SIDs are
// Everyone, the logon SID and the synthetic SIDs of its writable roots (one
// per root, see package sid), lowered to Low integrity. Writable roots
// carry inheritable allow ACEs for their SID and a Low integrity label;
// protected paths carry deny ACEs and a Medium label (see package acl),
// applied once and re-checked cheaply on every run. The label is what
// stops deletes and renames outside the roots: the restricted pass of a
// write-restricted token does not cover DELETE or FILE_DELETE_CHILD. The child starts suspended, joins a kill-on-close job and only then
// runs, so the whole tree dies with it, on timeout or on cancel.
//
// # State
//
// %LOCALAPPDATA%\agentbox holds sids.json (the SIDs, and every path whose
// DACL agentbox changed), denybin\ (the ssh/scp stubs) and toolcache\ (the
// per-workspace private tool caches, see [PlanCaches]). `agentbox cleanup`
// revokes the ACEs, removes still-empty placeholder directories and the
// allow_git_writes placeholder files still holding what agentbox wrote
// (acl.GitPlan), and deletes all three.
//
// # Limitations
//
// Network blocking is advisory only (see [NetworkNote]); see [Limits] for
// the rest. The ACEs and labels stay on the writable roots between runs,
// by design, so later runs are fast.
package unelevated

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

// NetworkNote is what `agentbox run` and `doctor` say when the policy has
// the network off in this mode.
const NetworkNote = "network is blocked only by advice in Windows unelevated mode: " +
	"proxy variables point at 127.0.0.1:9, git and ssh/scp fail, package managers are told to stay offline, " +
	"but a program that ignores them can still reach the network " +
	`(set [windows] sandbox = "elevated" for a firewall-enforced block)`

// EgressNote is what `agentbox run` says with an allow-list in this mode.
const EgressNote = "the network allow-list is advisory only in Windows unelevated mode: " +
	"proxy variables point at agentbox's proxy, which enforces the allow-list, " +
	"but a program that ignores them reaches the network directly"

// DenybinDir is the stub directory inside the state directory. It is not
// under any writable root, so the sandboxed command cannot alter the stubs.
func DenybinDir(stateDir string) string { return filepath.Join(stateDir, "denybin") }

// WriteDenybin writes the ssh/scp stubs, rewriting any file whose content
// differs, and removes nothing else.
func WriteDenybin(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("denybin: %w", err)
	}
	for name, content := range winenv.StubFiles() {
		p := filepath.Join(dir, name)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, []byte(content)) {
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("denybin: %w", err)
		}
	}
	return nil
}

// Limits says what unelevated mode does not guarantee for pol, beyond the
// network (NetworkNote): doctor lists it and every run prints it. The
// command runs at Low integrity with its writable roots labelled Low and
// protected paths labelled Medium (acl.IntegrityPlan); what that leaves
// open is named here.
func Limits(pol *policy.Policy) []string {
	if pol == nil {
		return nil
	}
	switch pol.Mode() {
	case policy.WorkspaceWrite:
		out := []string{"the writable roots carry a Low integrity label, so other Low-integrity programs of yours " +
			"(browser and document sandboxes, processes agentbox started earlier) can write there too"}
		return append(out, acl.ResidualRisks(pol)...)
	case policy.ReadOnly:
		return []string{"a read-only run can still delete or rename files in directories labelled Low integrity: " +
			"the writable roots of earlier workspace-write runs (until agentbox cleanup) and %USERPROFILE%\\AppData\\LocalLow"}
	}
	return nil
}

// ChildEnv is the environment the command gets: env as given, plus the
// advisory network block when pol has the network off. With an
// allow-list, proxyEnv (agentbox's proxy, KEY=VALUE) replaces the dead
// proxy; without proxyEnv an allow-listed policy gets the plain block.
func ChildEnv(pol *policy.Policy, env []string, denybin string, proxyEnv ...string) []string {
	if pol.Network() {
		return env
	}
	if pol.AllowList() != nil && len(proxyEnv) > 0 {
		return winenv.AllowListed(env, denybin, proxyEnv)
	}
	return winenv.NoNetwork(env, denybin)
}

// Sandbox is the prepared per-user state: SIDs, denybin.
type Sandbox struct {
	StateDir string
	State    *sid.State
	// ACL is what Prepare did to the file system this time; a run whose
	// grants are all in place modifies nothing.
	ACL acl.Result
}

// RunSIDs are the synthetic SIDs a command under pol carries as
// restricting SIDs: its writable roots' SIDs for workspace-write (only
// those: another workspace's grants must not apply), the read-only SID
// otherwise. The roots must have been prepared.
func (sb *Sandbox) RunSIDs(pol *policy.Policy) ([]string, error) {
	if pol.Mode() != policy.WorkspaceWrite {
		return []string{sb.State.ReadOnly}, nil
	}
	var out []string
	for _, r := range pol.WritableRoots() {
		s, ok := sb.State.LookupRoot(r)
		if !ok {
			return nil, fmt.Errorf("writable root %s has no sandbox SID (not prepared)", r)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		// No writable root at all: nothing to grant, but the token
		// still needs a SID of its own.
		out = append(out, sb.State.ReadOnly)
	}
	return out, nil
}

// Caches is where one run's private tool caches go. Windows has no
// overlays, so, as on macOS, each tool with a relocating variable is
// pointed at a per-workspace directory under the state directory
// (cold the first time, warm from then on) and the host's own cache is
// never made writable.
type Caches struct {
	// Root holds every private cache of the workspace
	// (toolcache\<key>\private); "" when no cache goes private. It is
	// granted exactly as a writable root is: an allow for a synthetic SID
	// of its own, which the run carries, and a Low label.
	Root string
	// Env is NAME=value for each tool pointed into Root.
	Env []string
}

// PlanCaches places pol's tool caches for this backend, given the
// command's environment. It refuses (fails closed) when Root would make
// part of a host cache writable, or when it is or contains a directory on
// the command's PATH.
func PlanCaches(pol *policy.Policy, env []string) (Caches, error) {
	var cs Caches
	if pol == nil || pol.Mode() != policy.WorkspaceWrite || pol.ToolCacheMode() == policy.CachesOff {
		return cs, nil
	}
	for _, d := range toolcache.Decide(pol.ToolCacheInputs(), false) {
		if d.How != toolcache.Private {
			continue
		}
		c := d.Cache
		root := acl.Clean(toolcache.PrivateRoot(c))
		if cs.Root != "" && !acl.SamePath(cs.Root, root) {
			return Caches{}, fmt.Errorf("tool cache %s: private directory %s is not under %s", c.Name, root, cs.Root)
		}
		cs.Root = root
		// Windows variable names are case-insensitive: the old value
		// (MAVEN_OPTS) may be spelled any way.
		old, _ := winenv.Get(env, c.Env)
		cs.Env = append(cs.Env, toolcache.Env(d, acl.Join(root, c.Name), []string{c.Env + "=" + old})...)
	}
	if cs.Root == "" {
		return cs, nil
	}
	for _, c := range pol.ToolCaches() {
		for _, h := range []string{c.Host, c.Named} {
			if h != "" && (acl.Within(h, cs.Root) || acl.Within(cs.Root, h)) {
				return Caches{}, fmt.Errorf("tool caches: the private directory %s overlaps the host's %s at %s, which must never be writable from the sandbox; move that cache (%s) or set [sandbox_workspace_write] tool_caches = \"off\"", cs.Root, c.Desc, h, c.Env)
			}
		}
	}
	if p := pathWithin(env, cs.Root); p != "" {
		return Caches{}, fmt.Errorf("tool caches: %s on PATH lies in the private cache directory %s, which the sandbox may write; remove it from PATH or set [sandbox_workspace_write] tool_caches = \"off\"", p, cs.Root)
	}
	return cs, nil
}

// WithCaches returns pol with cs.Root among its writable roots (a copy;
// pol itself is unchanged), so that Prepare grants it and RunSIDs carries
// its SID exactly as for any other writable root.
func WithCaches(pol *policy.Policy, cs Caches) *policy.Policy { return withRoot(pol, cs.Root) }

// WithTemp is WithCaches for the private temporary directory.
func WithTemp(pol *policy.Policy, tmp Temp) *policy.Policy { return withRoot(pol, tmp.Root) }

func withRoot(pol *policy.Policy, root string) *policy.Policy {
	if root == "" {
		return pol
	}
	return pol.WithWritableRoot(root)
}

// Temp is the workspace's private temporary directory on this backend
// (policy.PrivateTemp): Windows cannot show it at %TEMP%'s path, so
// %TEMP% and %TMP% are pointed at it, and it is granted exactly as a
// writable root is (an allow for a synthetic SID of its own, which the
// run carries, and a Low label), like the private tool caches.
type Temp struct {
	Root string
	// Env is NAME=value for %TEMP% and %TMP%.
	Env []string
}

// PlanTemp places pol's private temporary directory. It refuses (fails
// closed) when a directory on the command's PATH lies in it: the command
// could plant programs the user runs.
func PlanTemp(pol *policy.Policy, env []string) (Temp, error) {
	var tmp Temp
	if pol == nil || pol.Mode() != policy.WorkspaceWrite {
		return tmp, nil
	}
	for _, t := range pol.PrivateTemps() {
		if tmp.Root != "" && !acl.SamePath(tmp.Root, t.Dir) {
			return Temp{}, fmt.Errorf("private temporary directories %s and %s: want one", tmp.Root, t.Dir)
		}
		tmp.Root = acl.Clean(t.Dir)
	}
	if tmp.Root == "" {
		return tmp, nil
	}
	tmp.Env = []string{"TEMP=" + tmp.Root, "TMP=" + tmp.Root}
	if p := pathWithin(env, tmp.Root); p != "" {
		return Temp{}, fmt.Errorf("%s on PATH lies in the private temporary directory %s, which the sandbox may write; remove it from PATH or set [sandbox_workspace_write] share_slash_tmp = true", p, tmp.Root)
	}
	return tmp, nil
}

// pathWithin returns the first directory on env's PATH that lies in
// root, "" when none does: the command could plant programs there that
// the user's shell runs.
func pathWithin(env []string, root string) string {
	path, _ := winenv.Get(env, "PATH")
	for _, p := range strings.Split(path, ";") {
		if p = strings.Trim(p, `" `); p != "" && acl.Within(p, root) {
			return p
		}
	}
	return ""
}

// CacheEnv returns env with cs's variables set, replacing every other
// spelling of their names.
func CacheEnv(env []string, cs Caches) []string { return setAll(env, cs.Env) }

// TempEnv is CacheEnv for the private temporary directory.
func TempEnv(env []string, tmp Temp) []string { return setAll(env, tmp.Env) }

func setAll(env, kvs []string) []string {
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		env = winenv.Set(env, k, v)
	}
	return env
}

// RemoveCaches deletes the state directory's toolcache tree and returns
// it, or "" when there is none (see removeTree).
func RemoveCaches(stateDir string) (string, error) {
	return removeTree(agentdirs.ToolCacheRoot(stateDir), "tool caches")
}

// RemoveTemps deletes the state directory's tree of private temporary
// directories and returns it, or "" when there is none (see removeTree).
func RemoveTemps(stateDir string) (string, error) {
	return removeTree(agentdirs.TempRoot(stateDir), "private temporary directories")
}

// removeTree deletes root, a tree commands wrote, and returns it, or ""
// when there is none. Go's module cache makes its files read-only, which
// on Windows blocks deletion, so every directory and regular file is made
// writable first. Removal is os.Remove, deepest first (os.RemoveAll fails
// under Wine): a link or junction the command made is removed itself,
// never followed (WalkDir does not descend into it).
func removeTree(root, what string) (string, error) {
	if _, err := os.Lstat(root); err != nil {
		return "", nil
	}
	var paths []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case d == nil:
		case d.IsDir():
			os.Chmod(p, 0o700)
		case d.Type().IsRegular():
			os.Chmod(p, 0o600)
		}
		paths = append(paths, p)
		return nil
	})
	slices.Reverse(paths)
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("removing %s in %s: %w", what, root, err)
	}
	return root, nil
}
