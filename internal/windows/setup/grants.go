package setup

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/windows/acl"
)

// ProfileExclusions are the parts of the real user's profile the sandbox
// users never get to read: credential stores, key material and browser
// profiles. Paths are relative to the profile and compared
// case-insensitively.
var ProfileExclusions = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config",
	".tsh", ".brev", ".pki", ".terraform.d", ".gcloud", ".oci",
	".netrc", "_netrc", ".git-credentials", ".npmrc", ".pypirc", ".vault-token",
	`AppData\Roaming\Microsoft\Credentials`, `AppData\Local\Microsoft\Credentials`,
	`AppData\Roaming\Microsoft\Protect`, `AppData\Roaming\Microsoft\Crypto`,
	`AppData\Roaming\Microsoft\Vault`, `AppData\Local\Microsoft\Vault`,
	`AppData\Roaming\Microsoft\SystemCertificates`,
	`AppData\Local\Google\Chrome`, `AppData\Local\Microsoft\Edge`,
	`AppData\Local\BraveSoftware`, `AppData\Local\Chromium`,
	`AppData\Roaming\Mozilla`, `AppData\Local\Mozilla`,
	`AppData\Roaming\Opera Software`, `AppData\Local\Vivaldi`,
	`AppData\Roaming\gh`, `AppData\Roaming\GitHub CLI`,
	`NTUSER.DAT`,
}

// Grant is one read ACE setup gives the sandbox group.
type Grant struct {
	Path string `json:"path"`
	// Inherit is true for a root granted with OI|CI (the whole tree) and
	// false for a directory on the way to an exclusion, which gets
	// read/traverse on itself only so the exclusion inherits nothing.
	Inherit bool `json:"inherit"`
}

// ACE is the ACE the grant adds for groupSID.
func (g Grant) ACE(groupSID string) acl.ACE {
	a := acl.ACE{Mask: acl.FileGenericRead | acl.FileGenericExecute, SID: groupSID}
	if g.Inherit {
		a.Flags = acl.ObjectInherit | acl.ContainerInherit
	}
	return a
}

// SystemReadRoots are the machine directories where tools live, from the
// environment (SystemRoot, ProgramFiles, ProgramFiles(x86), ProgramW6432,
// ProgramData), de-duplicated.
func SystemReadRoots(getenv func(string) string) []string {
	var out []string
	for _, k := range []string{"SystemRoot", "ProgramFiles", "ProgramFiles(x86)", "ProgramW6432", "ProgramData"} {
		if v := strings.TrimRight(getenv(k), `\`); v != "" && !containsFold(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// PlanReadGrants returns the grants for the real user's profile: every
// entry of the profile is granted as a whole tree, except that a directory
// which contains an exclusion is descended into (list returns a
// directory's entries by name) and gets a this-directory-only grant, and
// the exclusions themselves get nothing. Extra roots and system roots are
// granted as whole trees.
func PlanReadGrants(profile string, roots []string, list func(dir string) ([]string, error)) ([]Grant, error) {
	var out []Grant
	for _, r := range roots {
		out = append(out, Grant{Path: r, Inherit: true})
	}
	var excl []string
	for _, e := range ProfileExclusions {
		excl = append(excl, strings.ToLower(e))
	}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		out = append(out, Grant{Path: dir, Inherit: false})
		names, err := list(dir)
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
		for _, n := range names {
			r := n
			if rel != "" {
				r = rel + `\` + n
			}
			lr := strings.ToLower(r)
			switch {
			case slices.Contains(excl, lr):
				// Excluded: no ACE, and its parent's ACE does not inherit.
			case slices.ContainsFunc(excl, func(e string) bool { return strings.HasPrefix(e, lr+`\`) }):
				if err := walk(dir+`\`+n, r); err != nil {
					return err
				}
			default:
				out = append(out, Grant{Path: dir + `\` + n, Inherit: true})
			}
		}
		return nil
	}
	if err := walk(strings.TrimRight(profile, `\`), ""); err != nil {
		return out, err
	}
	return out, nil
}

// readerSIDs are the principals whose read access a sandbox user already
// has through membership: Everyone, Authenticated Users, Users (SDDL
// aliases and full forms). A root readable by one of them needs no ACE.
var readerSIDs = []string{"WD", "S-1-1-0", "AU", "S-1-5-11", "BU", "S-1-5-32-545"}

// Readable reports whether d already lets the sandbox group read g:
// allow ACEs (explicit or inherited) for the group or one of the broad
// reader groups with all of read+execute on the object itself and, when g
// covers a tree, inheriting to both files and folders at every depth.
// Those may be one OI|CI ACE or several: Windows' own directories split
// them, e.g. C:\Windows has (A;;0x1200a9;;;BU) for itself and
// (A;OICIIO;GXGR;;;BU) for everything below, and a setup that missed that
// tried to rewrite DACLs it may not touch. This is the check that makes a
// second setup run (or a system root like C:\Windows) cost one DACL read
// and no tree walk.
func Readable(d *acl.DACL, g Grant, groupSID string) bool {
	want := uint32(acl.FileGenericRead | acl.FileGenericExecute)
	var self, files, dirs bool
	for _, raw := range d.ACEs {
		a := raw.Parsed
		if !raw.OK || a.Deny || a.Mask&want != want {
			continue
		}
		if !strings.EqualFold(a.SID, groupSID) && !containsFold(readerSIDs, a.SID) {
			continue
		}
		if a.Flags&acl.InheritOnly == 0 {
			self = true
		}
		if a.Flags&acl.NoPropagate == 0 {
			files = files || a.Flags&acl.ObjectInherit != 0
			dirs = dirs || a.Flags&acl.ContainerInherit != 0
		}
	}
	if !g.Inherit {
		return self
	}
	return self && files && dirs
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// Grants is the file that records every path setup (or the runner's
// write-root grants) put an ACE on, so cleanup revokes exactly those.
type Grants struct {
	Version int      `json:"version"`
	Paths   []string `json:"paths"`
	// Done is set when the background read-grant pass finished.
	Done bool `json:"done"`
}

// ParseGrants decodes the grants file.
func ParseGrants(b []byte) (*Grants, error) {
	return decodeStrict[Grants](b, "grants file")
}

// Add records path once (case-insensitively) and reports whether it was new.
func (g *Grants) Add(path string) bool {
	if containsFold(g.Paths, path) {
		return false
	}
	g.Paths = append(g.Paths, path)
	return true
}

// Marshal encodes the grants file.
func (g *Grants) Marshal() ([]byte, error) { return json.MarshalIndent(g, "", "  ") }
