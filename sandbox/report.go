package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// RunReport is what a finished command reports besides its exit status,
// set in Cmd.Report by Wait. It marshals to the run report agentbox's CLI
// writes; sections are named so that more can be added.
type RunReport struct {
	ExitCode int            `json:"exit_code"`
	Network  *NetworkReport `json:"network"`
	// Filesystem is what the sandbox refused the command's file
	// operations (see [FilesystemReport]).
	Filesystem *FilesystemReport `json:"filesystem"`
	// Tmp says where the command's private temporary directories are on
	// the host (what it wrote to /tmp or $TMPDIR is there, not in the
	// host's); absent when the policy has none.
	Tmp []TmpDir `json:"tmp,omitempty"`
	// Suggest is the [Request] that would have allowed what the command
	// was refused, for an agent to ask for in one step (the MCP tool's
	// request_permissions); absent when nothing was refused that a
	// request could allow.
	Suggest *Suggestion `json:"suggest,omitempty"`
	// Environment says which of the caller's variables the command did
	// not get.
	Environment *EnvironmentReport `json:"environment"`

	// pol is the policy the command ran under, for SetSuggest's
	// directories (nil: none suggested).
	pol *policy.Policy
}

// Suggestion is the "suggest" section: the directories and domains of a
// [Request] that would have allowed what was refused.
type Suggestion struct {
	AddDirs      []string `json:"add_dirs,omitempty"`
	AllowDomains []string `json:"allow_domains,omitempty"`
}

// EnvironmentReport is the "environment" section: the names (never the
// values) of the caller's variables withheld from the command, by the
// secret-name patterns or [shell_environment_policy].
type EnvironmentReport struct {
	Withheld []string `json:"withheld"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TmpDir is one private temporary directory of the "tmp" section: the
// path the command's programs used (/tmp, $TMPDIR's value) and the
// directory on the host that stood in for it.
type TmpDir struct {
	Path string `json:"path"`
	Host string `json:"host"`
}

// FilesystemReport is the "filesystem" section: the file operations the
// sandbox refused the command, each with the rule that refused it, in the
// order they first happened. An observer reports them; enforcement is
// the sandbox's walls, so a race with the command can cost an entry here,
// never a wall. Unavailable, when set, says why nothing was observed
// (Denied is then empty for that reason, not because nothing was
// refused): another platform, or an observer that could not be
// installed.
type FilesystemReport struct {
	Denied      []FilesystemDenied `json:"denied"`
	Unavailable string             `json:"unavailable,omitempty"`
	// ReadsUnavailable, when set, says why reads of hidden paths were
	// not observed although the rest of the section was (a lone run).
	ReadsUnavailable string `json:"reads_unavailable,omitempty"`
}

// FilesystemDenied is one refused file operation and how often it was
// refused.
//
// Op is one of [FileOpWrite], [FileOpCreate], [FileOpDelete],
// [FileOpRename], [FileOpLink], [FileOpMetadata] and [FileOpRead] (a
// hidden path). Path is the path as the command named it, made absolute
// against its working directory or directory descriptor (the rule was
// applied to where it leads, symlinks followed). Reason names the rule:
// [FileReasonOutside], [FileReasonGit], [FileReasonHidden], or
// "protected path NAME" (see [FileReasonProtected]).
type FilesystemDenied struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Operations and reasons of [FilesystemDenied].
const (
	FileOpWrite    = fsreport.OpWrite
	FileOpCreate   = fsreport.OpCreate
	FileOpDelete   = fsreport.OpDelete
	FileOpRename   = fsreport.OpRename
	FileOpLink     = fsreport.OpLink
	FileOpMetadata = fsreport.OpMetadata
	FileOpRead     = fsreport.OpRead

	FileReasonOutside = fsreport.ReasonOutside
	FileReasonGit     = fsreport.ReasonGit
	FileReasonHidden  = fsreport.ReasonHidden
	// FileReasonProtected starts the reason of a protected path; its
	// name (".agents", ".git/hooks") follows.
	FileReasonProtected = fsreport.ReasonProtectedPrefix
)

// SetFilesystem fills r's filesystem section from an observer's refusals
// and, when it did not run, why; for callers that carry a report over
// another channel (the resident helper).
func (r *RunReport) SetFilesystem(ds []fsreport.Denied, unavailable string) {
	r.Filesystem = &FilesystemReport{Denied: make([]FilesystemDenied, 0, len(ds)), Unavailable: unavailable}
	for _, d := range ds {
		r.Filesystem.Denied = append(r.Filesystem.Denied, FilesystemDenied(d))
	}
}

// Network modes in [NetworkReport].Mode: no network, only the
// allow-list's destinations through agentbox's proxy, or the network
// without limits.
const (
	NetworkOff       = "off"
	NetworkAllowList = "allow-list"
	NetworkOn        = "on"
)

// NetworkReport is the "network" section: with an allow-list, every
// destination the command asked agentbox's proxy for, allowed or refused.
type NetworkReport struct {
	Mode    string           `json:"mode"`
	Allowed []NetworkAllowed `json:"allowed"`
	Denied  []NetworkDenied  `json:"denied"`
	// Published counts the connections carried to each published
	// port (absent without any).
	Published []NetworkPublished `json:"published,omitempty"`
}

// NetworkAllowed is a destination the proxy connected to, and how often.
type NetworkAllowed struct {
	Host  string `json:"host"`
	Port  uint16 `json:"port"`
	Count int    `json:"count"`
}

// NetworkDenied is a destination the proxy refused, why, and how often;
// with the network off, also a name the sandbox's name server was asked
// for (Port 0, left out of the JSON), and an address a connect named.
type NetworkDenied struct {
	Host   string `json:"host"`
	Port   uint16 `json:"port,omitempty"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// NewRunReport is the report of a command that ended with exitCode and
// made no network requests through a proxy, or never started, run with
// this process's environment: for a
// caller that writes a report for every command, including those whose
// Start failed (then exitCode is the [StartError]'s Code).
func NewRunReport(pol *policy.Policy, exitCode int) *RunReport {
	r := newRunReport(pol, exitCode)
	if pol != nil {
		// What this process's environment loses: the CLI's own runs,
		// through the helper or not, pass it whole to the command.
		_, wh := pol.FilterEnv(os.Environ())
		r.Environment.Withheld = nonNil(wh)
	}
	return r
}

// newRunReport is NewRunReport without the environment's section, for a
// Cmd that filtered its own environment at Start.
func newRunReport(pol *policy.Policy, exitCode int) *RunReport {
	mode := NetworkOff
	switch {
	case pol != nil && pol.AllowList() != nil:
		mode = NetworkAllowList
	case pol != nil && pol.Network():
		mode = NetworkOn
	}
	r := &RunReport{ExitCode: exitCode, Network: &NetworkReport{Mode: mode, Allowed: []NetworkAllowed{}, Denied: []NetworkDenied{}},
		Filesystem: &FilesystemReport{Denied: []FilesystemDenied{}}, pol: pol}
	r.Environment = &EnvironmentReport{Withheld: []string{}}
	if pol != nil {
		for _, t := range pol.PrivateTemps() {
			r.Tmp = append(r.Tmp, TmpDir{Path: t.Path, Host: t.Dir})
		}
	}
	return r
}

func (r *RunReport) addNetwork(rep netproxy.Report) {
	for _, a := range rep.Allowed {
		r.Network.Allowed = append(r.Network.Allowed, NetworkAllowed(a))
	}
	for _, d := range rep.Denied {
		r.Network.Denied = append(r.Network.Denied, NetworkDenied(d))
	}
}

// SetSuggest sets r.Suggest from what r says was refused: every host the
// network section refused for not being allowed (a denied_domains refusal
// or a malformed request is no request's to lift). Directories come from
// the filesystem section's refused writes, when the report has one
// (suggestDirs). Wait calls it; a caller that builds a report of its own
// from refusals (the resident helper's client) calls it once they are in.
func (r *RunReport) SetSuggest() {
	var s Suggestion
	seen := map[string]bool{}
	if r.Network != nil {
		for _, d := range r.Network.Denied {
			if d.Reason != policy.ReasonNotAllowed && d.Reason != policy.ReasonNetworkOff {
				continue
			}
			p := d.Host
			// Only the port asked for, unless it is the web's: a
			// pattern without one allows every port.
			if d.Port != 0 && d.Port != 80 && d.Port != 443 && !strings.Contains(d.Host, ":") {
				p = net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port)))
			}
			if _, err := policy.ParseAllowList([]string{p}, nil, false); err != nil || seen[p] {
				continue
			}
			seen[p] = true
			s.AllowDomains = append(s.AllowDomains, p)
		}
	}
	s.AddDirs = suggestDirs(r)
	if len(s.AddDirs) > 0 || len(s.AllowDomains) > 0 {
		r.Suggest = &s
	}
}

// maxSuggestDirs bounds the directories suggested (and the policies
// resolved to check them).
const maxSuggestDirs = 5

// suggestDirs is the directories a Request would add for the refused
// writes of r's filesystem section: for each refusal outside the writable
// roots, the nearest existing directory above the path, when the policy
// would accept it as a writable root ([policy.Policy.Widen]: the trust
// rules, the protected names). A path refused for another reason (a
// protected name, .git, a hidden path) is no request's to lift.
func suggestDirs(r *RunReport) []string {
	if r.pol == nil || r.Filesystem == nil {
		return nil
	}
	var dirs []string
	seen := map[string]bool{}
	for _, d := range r.Filesystem.Denied {
		if d.Reason != FileReasonOutside || d.Op == FileOpRead || !filepath.IsAbs(d.Path) || len(dirs) == maxSuggestDirs {
			continue
		}
		dir := filepath.Dir(d.Path)
		for {
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				break
			}
			up := filepath.Dir(dir)
			if up == dir {
				break
			}
			dir = up
		}
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if _, err := r.pol.Widen(policy.Widening{AddDirs: []string{dir}}); err == nil {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// lonelyReads is why a lone run's report lists no reads of hidden paths.
const lonelyReads = "reads of hidden paths are observed in sessions and runs the resident helper serves, not in lone runs (watching them would cost each run 10-15 ms)"
