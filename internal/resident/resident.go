// Package resident is agentbox's per-user resident helper: a process the
// CLI starts on demand that holds prepared sandboxes ([sandbox.Session])
// so that `agentbox run` need not build one for every command, and exits
// when idle. Only Linux has one; elsewhere every run starts on its own.
//
// Its one client is the lean one (package client): from a package init
// of `agentbox run` it sends the run as typed (arguments, directory,
// environment, stdio; package proto), and the helper resolves the policy
// exactly as the client's CLI would have (package contract's flags,
// [policy.ResolveFor]). It serves the run only from a session prepared
// for exactly that policy's canonical bytes and everything else that
// shapes the sandbox (the identity of the roots and tool caches, the
// binary, the state directory, the umask and resource limits), and
// otherwise prepares a new one. Anything the helper does not handle as a
// lone run would, it declines before anything runs, and the client's
// full CLI runs it on its own: the helper only ever makes a run faster,
// never different.
package resident

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/netproxy"
)

// Disabled reports whether the resident helper is switched off for this
// run: AGENTBOX_RESIDENT=0 (or false, off, no), or [linux] resident =
// false in the config (configOff).
func Disabled(getenv func(string) string, configOff bool) bool {
	if configOff {
		return true
	}
	switch strings.ToLower(getenv("AGENTBOX_RESIDENT")) {
	case "0", "false", "off", "no":
		return true
	}
	return false
}

// Dir is the helper's directory under agentbox's state directory: mode
// 0700, holding its socket and lock files.
func Dir(stateDir string) string { return filepath.Join(stateDir, "resident") }

// idleEnv overrides the idle period (seconds) for tests.
const idleEnv = "AGENTBOX_RESIDENT_IDLE"

// defaultIdle is how long the helper stays without a command running.
const defaultIdle = 30 * time.Second

// maxSessions caps the prepared sandboxes the helper holds; the least
// recently used idle one is closed to make room.
const maxSessions = 4

func idlePeriod() time.Duration {
	if s := os.Getenv(idleEnv); s != "" {
		if n, err := strconv.ParseFloat(s, 64); err == nil && n > 0 {
			return time.Duration(n * float64(time.Second))
		}
	}
	return defaultIdle
}

// Result is how a command the helper ran ended: its Denied holds at
// most maxDenied entries and the rest counted in one more, its Files
// fit in maxFiles bytes of their encoding (fsreport.Fit).
type Result = contract.Parts

// maxFiles bounds the bytes of file refusals a served run's report and
// stderr carry; maxDenied the network refusals. A lone run has no such
// bound: a helper's command that floods refusals must not make every
// run's answer large (the stderr lines they make travel in the client's
// 64 KiB messages, proto.MaxReply).
const (
	maxFiles  = 16 << 10
	maxDenied = 128
)

// capDenied is ds, the entries beyond maxDenied counted in one.
func capDenied(ds []netproxy.Denied) []netproxy.Denied {
	if len(ds) <= maxDenied {
		return ds
	}
	out := append([]netproxy.Denied{}, ds[:maxDenied]...)
	rest := netproxy.Denied{Host: "(other destinations)", Reason: "not carried by the resident helper"}
	for _, d := range ds[maxDenied:] {
		rest.Count += d.Count
	}
	return append(out, rest)
}

// rootID is what is on disk at a root, a tool cache or the workspace when
// the policy was resolved: a sandbox prepared for another directory at
// the same path must not serve it.
type rootID struct {
	Path   string
	Exists bool
	Dev    uint64
	Ino    uint64
}

// StopOutcome is what [StopIdle] did.
type StopOutcome struct {
	// Pid is the helper's, 0 when none was running.
	Pid int
	// Stopped: the helper was idle and has exited.
	Stopped bool
	// Busy is, for a helper left running, the commands it was running
	// (or preparing a sandbox for), and Closed the idle sessions it
	// closed; 0 with Why set when it could not be asked.
	Busy, Closed int
	// Why says why a helper was left running.
	Why string
}
