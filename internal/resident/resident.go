// Package resident is agentbox's per-user resident helper: a process the
// CLI starts on demand that holds prepared sandboxes ([sandbox.Session])
// so that `agentbox run` need not build one for every command, and exits
// when idle. Only Linux has one; elsewhere every run starts on its own.
//
// The CLI resolves the policy for every run as it always does and sends
// the helper the policy's canonical bytes ([policy.Policy.Encode]) with
// everything else that shapes the sandbox (the identity of the roots and
// tool caches, the binary, the state directory, the umask and resource
// limits); the helper serves the run only from a session prepared for
// exactly those bytes, and otherwise prepares a new one. Anything the
// helper does not handle as a lone run would, the CLI runs on its own:
// the helper only ever makes a run faster, never different.
package resident

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/wirestr"
	"github.com/agentbox/agentbox/policy"
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
// fit in maxFiles bytes.
type Result = contract.Parts

// maxFiles bounds the bytes of file refusals a reply carries: with
// maxDenied network refusals it fits the client's 64 KiB buffer.
const maxFiles = 16 << 10

// maxDenied bounds the refusals a reply carries, so that it fits in one
// message of the client's buffer.
const maxDenied = 128

// capDenied is ds, the entries beyond maxDenied counted in one.
func capDenied(ds []netpolicy.Denied) []netpolicy.Denied {
	if len(ds) <= maxDenied {
		return ds
	}
	out := append([]netpolicy.Denied{}, ds[:maxDenied]...)
	rest := netpolicy.Denied{Host: "(other destinations)", Reason: "not carried by the resident helper"}
	for _, d := range ds[maxDenied:] {
		rest.Count += d.Count
	}
	return append(out, rest)
}

// runRequest is the CLI's request for one command. The policy's canonical
// bytes travel after it in the same message (see encodeRequest).
type runRequest struct {
	Op string `json:"op"` // "run", "stop" or "stop-idle"
	// Key fields: together with the policy's bytes, the exact key of the
	// prepared sandbox that may serve the request.
	Binary   string      `json:"binary"` // identity of the CLI's executable
	StateDir string      `json:"state_dir"`
	Roots    []rootID    `json:"roots"`
	Umask    int         `json:"umask"`
	Rlimits  [][2]uint64 `json:"rlimits"`
	// The command.
	Argv    wirestr.Strings `json:"argv,omitempty"`
	Env     wirestr.Strings `json:"env,omitempty"`
	Timeout int64           `json:"timeout_ns,omitempty"`
}

// rootID is what is on disk at a root, a tool cache or the workspace when
// the CLI resolved the policy: a sandbox prepared for another directory at
// the same path must not serve it.
type rootID struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Dev    uint64 `json:"dev,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
}

// reply is the helper's answer: one Started (or Fallback), then one
// Exited.
type reply struct {
	Started  bool   `json:"started,omitempty"`
	Fallback string `json:"fallback,omitempty"` // why the CLI must run the command itself
	Exited   bool   `json:"exited,omitempty"`
	// The outcome of an Exited command, its fields inline.
	Result
	// Busy answers a stop-idle request the helper did not stop for: the
	// connections it serves (commands running, or being prepared).
	Busy int `json:"busy,omitempty"`
	// Closed is how many idle sessions it closed meanwhile.
	Closed int `json:"closed,omitempty"`
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

// control is a message from the CLI while the command runs.
type control struct {
	Op  string `json:"op"` // "signal"
	Sig int    `json:"sig"`
}

// Resolver turns a lean client's run, as typed (args from "run" on), into
// what the CLI would have run, resolving the policy with c standing for
// the client. It returns nil, with why, for anything the full CLI must
// handle itself (a flag error, --help, a report file, the helper switched
// off): nothing has happened yet, and the client's full CLI then does it
// all, its messages included.
type Resolver func(args []string, c policy.Caller) (run *Resolved, why string)

// Resolved is a run a Resolver accepted.
type Resolved struct {
	Policy  *policy.Policy
	Argv    []string
	Timeout time.Duration
}

// Finish is what the CLI would have written to stderr after the command
// ended with res, and the status it would have exited with: the
// contract's, which the CLI's own runs use too.
func (r *Resolved) Finish(res *Result) (stderr string, code int) {
	var b strings.Builder
	code = res.Outcome(r.Policy, r.Timeout).Finish(&b, nil)
	return b.String(), code
}
