// Package agentdirs names the directories agentbox keeps its own files in:
// the config file, the state directory and, under it, the tool-cache
// layers and the private temporary directories.
// Each takes the environment as a function, so that tests (and the
// Windows backend's tests on Linux) can name another machine's.
package agentdirs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
)

// Config returns where config.toml is looked for when no config file is
// named: $XDG_CONFIG_HOME/agentbox (or ~/.config/agentbox) on Unix,
// %APPDATA%\agentbox on Windows.
func Config(getenv func(string) string) string {
	if runtime.GOOS == "windows" {
		if d := getenv("APPDATA"); filepath.IsAbs(d) {
			return filepath.Join(d, "agentbox", "config.toml")
		}
		return ""
	}
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox", "config.toml")
	}
	// A relative $HOME names no fixed place; protecting it would protect
	// the wrong directory.
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "agentbox", "config.toml")
	}
	return ""
}

// State is where agentbox keeps its bookkeeping (placeholder records,
// synthetic SIDs): $XDG_STATE_HOME/agentbox or ~/.local/state/agentbox on
// Unix, %LOCALAPPDATA%\agentbox on Windows; "" when none can be named.
func State(getenv func(string) string, goos string) string {
	if goos == "windows" {
		if d := getenv("LOCALAPPDATA"); WindowsAbs(d) {
			// Spelled as the Windows backend spells it, whatever OS
			// this runs on (tests).
			return strings.TrimRight(d, `\/`) + `\agentbox`
		}
		return ""
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "agentbox")
	}
	return ""
}

// RequireState is [State] for a caller that cannot go on without a state
// directory (the Windows backend keeps its SIDs there): the error names
// what to set.
func RequireState(getenv func(string) string, goos string) (string, error) {
	if d := State(getenv, goos); d != "" {
		return d, nil
	}
	if goos == "windows" {
		return "", errors.New("LOCALAPPDATA is not set to an absolute path; cannot find agentbox's state directory")
	}
	return "", errors.New("neither XDG_STATE_HOME nor HOME is an absolute path; cannot find agentbox's state directory")
}

// WindowsAbs reports whether p is an absolute Windows path (C:\x or
// \\server\share), on any OS.
func WindowsAbs(p string) bool {
	if strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// Abs reports whether p is an absolute path in goos's syntax, on any OS
// (a policy is resolved, and tested, for another OS than the host's).
func Abs(p, goos string) bool {
	if goos == "windows" {
		return WindowsAbs(p)
	}
	return strings.HasPrefix(p, "/")
}

// ToolCacheRoot is where per-workspace cache layers live under the state
// directory.
func ToolCacheRoot(stateDir string) string { return filepath.Join(stateDir, "toolcache") }

// TempRoot is where the per-workspace private temporary directories (the
// sandbox's own /tmp and $TMPDIR, %TEMP% on Windows) live under the state
// directory, each in a directory named by [WorkspaceKey].
func TempRoot(stateDir string) string { return filepath.Join(stateDir, "tmp") }

// WorkspaceKey names a workspace's layers and private temporary directories: a hash of its path, so the
// directory name is fixed-length and reveals nothing odd to the file
// system.
func WorkspaceKey(workspace string) string {
	h := sha256.Sum256([]byte(workspace))
	return hex.EncodeToString(h[:8])
}
