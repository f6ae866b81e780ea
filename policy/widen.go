package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// source is what a resolved policy was made of: the options (with every
// path absolute) and the process they were resolved for.
type source struct {
	o      Options
	caller Caller
	goos   string
}

// Widening is more than a policy allows, for a command whose user
// approved it (see sandbox.Session's Approve).
type Widening struct {
	// AddDirs are directories to make writable roots: absolute, existing,
	// and refused by the same trust rules as Options.AddDirs.
	AddDirs []string
	// AllowDomains are allow-list patterns, as Options.AllowDomains; one
	// that [network] denied_domains refuses is refused.
	AllowDomains []string
}

// Empty reports whether w asks for nothing.
func (w Widening) Empty() bool { return len(w.AddDirs) == 0 && len(w.AllowDomains) == 0 }

// WidenError is a [Widening] that [Policy.Widen] cannot honour. Item is
// the directory or domain as asked; Why says what is wrong with it.
type WidenError struct {
	Item string
	Why  string
}

func (e *WidenError) Error() string { return e.Item + " " + e.Why }

// Widen returns p with w's directories writable (the protected names and
// paths inside them protected, as for any writable root) and w's domains
// allowed, resolved as [Resolve] resolves the same options given from the
// start. The result is a policy of its own; p is unchanged. Every item of
// w that cannot be honoured is named in the error (each a *WidenError, or
// the error of resolution), and nothing is widened then.
func (p *Policy) Widen(w Widening) (*Policy, error) {
	if p.src == nil {
		return nil, errors.New("policy: the policy was not made by Resolve and cannot be widened")
	}
	var errs []error
	if len(w.AddDirs) > 0 && p.f.Mode == ReadOnly {
		errs = append(errs, &WidenError{Item: strings.Join(w.AddDirs, ", "), Why: "cannot be made writable: the sandbox is read-only (restart it in workspace-write mode)"})
	}
	rule := newConfineRule(p.src.caller.Env(), p.src.goos)
	var reals []string
	for _, d := range w.AddDirs {
		if !filepath.IsAbs(d) {
			errs = append(errs, &WidenError{Item: d, Why: "is not an absolute path (name the directory from /)"})
			continue
		}
		real, err := resolveDir(d, "", "directory")
		if err != nil {
			errs = append(errs, &WidenError{Item: d, Why: strings.TrimPrefix(err.Error(), "directory "+d+" ")})
			continue
		}
		if why := rule.check(real); why != "" {
			if real != filepath.Clean(d) {
				why = fmt.Sprintf("(%s) %s", real, why)
			}
			errs = append(errs, &WidenError{Item: d, Why: why + ": a writable root there confines nothing"})
			continue
		}
		if name := protectedComponent(real, p.f.ProtectedNames); name != "" {
			hint := "grants cannot open it; the user can change protected_subpaths in the config"
			if strings.EqualFold(name, ".git") {
				hint = "grants cannot open it; the user can restart with --allow-git-writes"
			}
			errs = append(errs, &WidenError{Item: d, Why: fmt.Sprintf("lies in %s, which programs on the host trust and every run keeps read-only: %s", name, hint)})
			continue
		}
		reals = append(reals, real)
	}
	domains := !p.f.Network // with the network on, every domain is reachable already
	if domains {
		// From the config, not the rules: without an allow-list the
		// policy keeps no rules, and the deny list must still hold for
		// the allow-list a grant makes.
		var denied []pattern
		if cfg := p.src.o.Config; cfg != nil {
			if r, err := parseAllowList(nil, "", cfg.Network.DeniedDomains, "denied_domains", false); err == nil {
				denied = r.denied
			}
		}
		for _, d := range w.AllowDomains {
			pat, err := parsePattern(d)
			if err != nil {
				errs = append(errs, &WidenError{Item: d, Why: "is not a domain pattern: " + err.Error()})
				continue
			}
			if deniedPattern(pat, denied) {
				errs = append(errs, &WidenError{Item: d, Why: "is refused by [network] denied_domains"})
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o := p.src.o
	o.AddDirs = append(slices.Clone(o.AddDirs), w.AddDirs...)
	if domains {
		o.AllowDomains = append(slices.Clone(o.AllowDomains), w.AllowDomains...)
	}
	q, err := resolveFor(o, p.src.caller, p.src.goos)
	if err != nil {
		return nil, err
	}
	// A protected path stays read-only in any root: granting it would
	// grant nothing, and the one who approves would think otherwise.
	for _, real := range reals {
		if q.f.Mode == WorkspaceWrite && !q.IsWritable(real) {
			errs = append(errs, &WidenError{Item: real, Why: "stays read-only in any writable root: it is a protected path (git's and the agents' directories, agentbox's own files)"})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q, nil
}

// deniedPattern reports whether a deny pattern refuses what pat allows,
// or part of it: a name (or address) it matches, the names below a
// wildcard it is, or a wildcard of the pattern's own.
func deniedPattern(pat pattern, denied []pattern) bool {
	port := pat.Port
	if port == 0 {
		port = 443
	}
	r := AllowList{denied: denied}
	if pat.Name == "" {
		return r.Decide(pat.Prefix.Addr().String(), port).Reason == ReasonDenied
	}
	if !pat.Wildcard {
		return r.Decide(pat.Name, port).Reason == ReasonDenied
	}
	for _, d := range denied {
		if d.Name == "" || (d.Port != 0 && pat.Port != 0 && d.Port != pat.Port) {
			continue
		}
		if d.Name == pat.Name || strings.HasSuffix(d.Name, "."+pat.Name) || strings.HasSuffix(pat.Name, "."+d.Name) && d.Wildcard {
			return true
		}
	}
	return false
}

// Covers reports whether p already allows everything w asks: each
// directory is writable (cleaned, symlinks resolved) and each domain
// reachable. A request it covers needs no one's approval.
func (p *Policy) Covers(w Widening) bool {
	for _, d := range w.AddDirs {
		if p.f.Mode == DangerFullAccess {
			break
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil || !filepath.IsAbs(d) || !p.IsWritable(real) {
			return false
		}
	}
	if p.f.Network {
		return true
	}
	for _, d := range w.AllowDomains {
		if p.f.Egress == nil || !slices.Contains(p.AllowedDomains(), d) {
			return false
		}
	}
	return true
}

// protectedComponent returns the protected name among p's components
// (compared as the case-insensitive file systems of macOS and Windows
// would), or "": a grant of such a directory would make writable what
// --add-dir of its parent keeps read-only.
func protectedComponent(p string, names []string) string {
	for _, c := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		for _, n := range names {
			if strings.EqualFold(c, n) {
				return n
			}
		}
	}
	return ""
}
