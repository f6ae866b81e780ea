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
// DACL agentbox changed) and denybin\ (the ssh/scp stubs). `agentbox
// cleanup` revokes the ACEs, removes still-empty placeholder directories and
// deletes both.
//
// # Limitations
//
// Network blocking is advisory only (see [NetworkNote]); see [Limits] for
// the rest. The ACEs and labels stay on the writable roots between runs,
// by design, so later runs are fast.
package unelevated

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/windows/acl"
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
	switch pol.Mode {
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
	if pol.Network {
		return env
	}
	if pol.Egress != nil && len(proxyEnv) > 0 {
		return winenv.AllowListed(env, denybin, proxyEnv)
	}
	return winenv.NoNetwork(env, denybin)
}
