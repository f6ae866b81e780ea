// Package unelevated is agentbox's Windows backend that never needs
// administrator rights (`[windows] sandbox = "unelevated"`, the default).
//
// A command runs under a write-restricted token whose restricting SIDs are
// Everyone, the logon SID and a synthetic SID (see package sid). Writable
// roots carry inheritable allow ACEs for that SID and protected paths carry
// deny ACEs (see package acl), applied once and re-checked cheaply on every
// run. The child starts suspended, joins a kill-on-close job and only then
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
// Network blocking is advisory only (see [NetworkNote]). Anything writable
// by Everyone stays writable, because Everyone is a restricting SID. The
// ACEs stay on the writable roots between runs, by design, so later runs
// are fast.
package unelevated

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

// NetworkNote is what `agentbox run` and `doctor` say when the policy has
// the network off in this mode.
const NetworkNote = "network is blocked only by advice in Windows unelevated mode: " +
	"proxy variables point at 127.0.0.1:9, git and ssh/scp fail, package managers are told to stay offline, " +
	"but a program that ignores them can still reach the network " +
	`(set [windows] sandbox = "elevated" for a firewall-enforced block)`

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

// ChildEnv is the environment the command gets: env as given, plus the
// advisory network block when pol has the network off.
func ChildEnv(pol *policy.Policy, env []string, denybin string) []string {
	if pol.Network {
		return env
	}
	return winenv.NoNetwork(env, denybin)
}
