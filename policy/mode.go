// Package policy resolves what a sandboxed command may do: the mode, the
// writable roots, the protected subpaths inside them, the network switch
// and the allow-list of destinations ([AllowList]).
// It is pure logic shared by every platform backend; it never calls into the
// operating system beyond reading the filesystem to resolve paths.
package policy

import "fmt"

// Mode is the sandbox mode, named as in Codex's config.toml.
type Mode string

const (
	// ReadOnly lets the command read what the user can read and write nothing.
	ReadOnly Mode = "read-only"
	// WorkspaceWrite adds writes beneath the workspace, the extra writable
	// roots and the temp directories. It is the default.
	WorkspaceWrite Mode = "workspace-write"
	// DangerFullAccess runs the command with no sandbox at all.
	DangerFullAccess Mode = "danger-full-access"
)

// Modes returns the valid modes, from the most to the least confined.
func Modes() []Mode { return []Mode{ReadOnly, WorkspaceWrite, DangerFullAccess} }

// ParseMode validates a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown sandbox mode %q (want read-only, workspace-write or danger-full-access)", s)
}

// WindowsSandbox selects the Windows backend.
type WindowsSandbox string

const (
	// Unelevated needs no administrator rights: synthetic SID, ACLs and a
	// write-restricted token; network blocking is advisory only.
	Unelevated WindowsSandbox = "unelevated"
	// Elevated runs commands as dedicated sandbox users, created once by
	// sandbox.Setup (which asks for administrator rights), with
	// firewall-enforced network blocking.
	Elevated WindowsSandbox = "elevated"
)

// ParseWindowsSandbox validates a [windows] sandbox value.
func ParseWindowsSandbox(s string) (WindowsSandbox, error) {
	switch WindowsSandbox(s) {
	case Unelevated, Elevated:
		return WindowsSandbox(s), nil
	}
	return "", fmt.Errorf("unknown windows sandbox %q (want unelevated or elevated)", s)
}
