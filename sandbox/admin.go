package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/git"
	"github.com/agentbox/agentbox/internal/secrets"
	"github.com/agentbox/agentbox/policy"
)

// Check is one finding of [Doctor]: a named capability or setting, whether
// it is as the policy needs, and what was seen.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Warning marks a check that is OK, every guarantee holding, but
	// whose Detail recommends a change (defence in depth agentbox cannot
	// make itself).
	Warning bool `json:"warning,omitempty"`
}

// Report is what [Doctor] found this machine can enforce for a policy.
// It marshals to the JSON agentbox's CLI prints for doctor.
type Report struct {
	OS      string  `json:"os"`
	Backend string  `json:"backend"` // what Cmd.Start would use, e.g. "namespaces+landlock+seccomp"
	Mode    string  `json:"mode"`    // the policy mode Doctor evaluated
	Checks  []Check `json:"checks"`
	// Missing lists guarantees the policy asks for that this machine cannot
	// give; Cmd.Start refuses such a policy unless it allows degraded mode
	// (policy.Options.AllowDegraded, [linux] allow_degraded).
	Missing []string `json:"missing"`
	// CanSandbox is false when no sandbox at all is possible here.
	CanSandbox bool `json:"can_sandbox"`
	// Hidden are the paths the policy keeps the command from reading,
	// as they are on this machine now (the built-in list, which
	// internal/secrets keeps as data, and deny_read).
	Hidden []HiddenPath `json:"hidden"`
	// Builtin is the built-in list, under each home ("~/.ssh"), with
	// what each entry holds; Hidden says which apply here.
	Builtin []HiddenPath `json:"builtin_hidden"`
	// SecretVariables are the name patterns of the variables withheld
	// by default (unless ignore_default_excludes).
	SecretVariables []string `json:"secret_variables"`
}

// HiddenPath is one entry of [Report].Hidden.
type HiddenPath struct {
	Path   string   `json:"path"`
	Why    string   `json:"why"`
	Reopen []string `json:"reopen,omitempty"`
}

// Doctor inspects the machine for pol (which may be nil for the default
// policy) without running anything sandboxed, so that a caller can tell a
// user what would be enforced, what would be refused and how to fix it
// before a command fails to start.
func Doctor(pol *policy.Policy) *Report {
	r := doctor(pol)
	r.Checks = append(r.Checks, gitBareCheck())
	r.Hidden = []HiddenPath{}
	r.SecretVariables = secrets.SecretVarPatterns()
	for _, e := range secrets.Defaults() {
		hp := HiddenPath{Path: "~/" + e.Path, Why: e.Why}
		for _, k := range e.Keep {
			hp.Reopen = append(hp.Reopen, "~/"+e.Path+"/"+k)
		}
		r.Builtin = append(r.Builtin, hp)
	}
	if pol != nil {
		for _, h := range pol.Hidden() {
			r.Hidden = append(r.Hidden, HiddenPath{Path: h.Path, Why: h.Why, Reopen: h.Reopen})
		}
		r.Checks = append(r.Checks, hardLinkCheck(pol.Hidden()))
	}
	if r.Missing == nil {
		r.Missing = []string{} // JSON: [], not null
	}
	return r
}

// hardLinkCheck warns about hidden files with more than one link: a
// second name outside the hidden paths reads the same bytes, and no
// mask or Landlock rule on the hidden name covers it. Directories are
// looked into a few levels deep (their files are what is hidden).
func hardLinkCheck(hidden []policy.Hidden) Check {
	c := Check{Name: "hidden hard links", OK: true}
	var linked []string
	seen := 0
	for _, h := range hidden {
		filepath.WalkDir(h.Path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if seen++; seen > 10_000 {
				return filepath.SkipAll
			}
			if d.IsDir() {
				if strings.Count(strings.TrimPrefix(p, h.Path), string(filepath.Separator)) >= 4 {
					return filepath.SkipDir
				}
				return nil
			}
			if n := linkCount(p); n > 1 && !slices.Contains(h.Reopen, p) {
				linked = append(linked, fmt.Sprintf("%s (%d links)", p, n))
			}
			return nil
		})
	}
	if len(linked) == 0 {
		c.Detail = fmt.Sprintf("no hidden file has a second name (%d hidden paths)", len(hidden))
		return c
	}
	c.Warning = true
	c.Detail = "readable through their other names, which hiding one name does not cover: " + strings.Join(linked, ", ") + "; replace the links with copies, or hide the other names too (deny_read)"
	return c
}

// gitBareCheck reports whether the user's git refuses repositories planted
// without a .git (safe.bareRepository=explicit). A sandboxed command may
// write HEAD, objects/, refs/ and a config naming a core.pager in any
// directory it can write; without the setting, the user's next `git log`
// there runs that pager on the host. What a command leaves behind is for
// agentbox's own post-run checks to refuse (what cannot be undone fails
// the run), not for the user's git config, so the setting is a
// recommendation, defence in depth only git can give: a warning, never a
// failed guarantee.
func gitBareCheck() Check {
	c := Check{Name: "git safe.bareRepository", OK: true}
	v, file, err := git.SafeBareRepository(os.Getenv)
	switch {
	case err != nil:
		c.Warning = true
		c.Detail = fmt.Sprintf("cannot read your git config: %v", err)
	case v == "explicit":
		c.Detail = "explicit (" + file + "): git refuses repositories a command plants without a .git"
	default:
		if v == "" {
			v = "unset (git's default: all)"
		}
		c.Warning = true
		c.Detail = v + ": recommended: git config --global safe.bareRepository explicit (git 2.38 or later), so that git itself refuses a repository skeleton a sandboxed command plants (HEAD, objects/, refs/, config), whose core.pager or fsmonitor would run when you run git there"
	}
	return c
}

// Setup does the one-time machine preparation the backend for pol needs
// (pol may be nil for the default policy) and writes what it did to out:
// on Linux, an AppArmor profile for this binary where AppArmor restricts
// unprivileged user namespaces (it needs root; without the restriction
// nothing is needed); on Windows, the sandbox users and firewall rules of
// elevated mode (one administrator prompt) or, unelevated, the SIDs and
// ACL grants of pol's roots, so the first run is fast; on macOS, nothing.
// It ends with a recommendation when git's safe.bareRepository is not
// explicit. Where there is no backend the error wraps [ErrUnsupported].
func Setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	if err := setup(ctx, pol, out); err != nil {
		return err
	}
	// agentbox does not edit the user's git config itself; it says the
	// one command that closes the planted-repository vector.
	if c := gitBareCheck(); c.Warning {
		fmt.Fprintln(out, "agentbox: recommended: git config --global safe.bareRepository explicit\n"+
			"  (otherwise a repository a sandboxed command plants, HEAD, objects/, refs/ and a config,\n"+
			"  runs its core.pager when you run git in that directory; git 2.38 or later)")
	}
	return nil
}

// Cleanup removes everything agentbox ever left on the machine (what
// Setup installed, tool cache layers, Windows ACL grants and sandbox
// users) and writes to out what it removed and what it could not. On
// Linux what a running sandbox uses (a tool cache layer, a placeholder,
// the AppArmor profile while agentbox processes run under it) is kept,
// and named.
func Cleanup(ctx context.Context, out io.Writer) error { return cleanup(ctx, out) }
