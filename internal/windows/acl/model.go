package acl

import (
	"slices"
	"strings"
)

// This file is a platform-free model of how Windows decides a file access,
// used by the tests to check agentbox's ACE plan and token recipe against
// the documented semantics, since no Windows host runs them. Each rule
// names the Microsoft documentation it follows.

// Token is the part of an access token the model needs.
type Token struct {
	// SIDs are the token's enabled user and group SIDs (normal pass).
	SIDs []string
	// Restricting are the restricting SIDs; empty for an ordinary token.
	Restricting []string
	// WriteRestricted is CreateRestrictedToken's WRITE_RESTRICTED flag.
	WriteRestricted bool
	// Integrity is the token's integrity level (LowIL, ...); zero stands
	// for the Medium level of a standard user's token (the model has no
	// Untrusted tokens).
	Integrity uint32
}

// WriteAccess is the set of rights the model treats as "write access" for
// a WRITE_RESTRICTED token. CreateRestrictedToken documents that the
// restricting SIDs "are considered only when evaluating write access"
// (https://learn.microsoft.com/en-us/windows/win32/api/securitybaseapi/nf-securitybaseapi-createrestrictedtoken)
// without listing the bits, so the model is parameterised: the default is
// every right that modifies an object (FILE_GENERIC_WRITE's specific bits
// plus DELETE, FILE_DELETE_CHILD, WRITE_DAC, WRITE_OWNER) and
// [GenericWriteOnly] is the narrow reading (only what GENERIC_WRITE maps to
// for files). READ_CONTROL and SYNCHRONIZE are in FILE_GENERIC_WRITE but
// cannot be "write access": every read asks for them, and reads are
// documented to keep the user's rights.
const (
	WriteAccess      = DenyWrite
	GenericWriteOnly = FileWriteData | FileAppendData | FileWriteEA | FileWriteAttributes
)

// Object is a file or directory in the model.
type Object struct {
	Dir bool
	// DACL holds the explicit ACEs in stored order.
	DACL []ACE
	// Label is the explicit mandatory label, nil when there is none.
	Label *Label
}

// Model is a tree of objects keyed by Windows path.
type Model struct {
	Objects map[string]*Object
	// WriteMask is what a write-restricted token checks against its
	// restricting SIDs; zero means WriteAccess.
	WriteMask uint32
}

// NewModel returns an empty model.
func NewModel() *Model { return &Model{Objects: map[string]*Object{}} }

// Put adds or replaces an object.
func (m *Model) Put(path string, dir bool, dacl ...ACE) {
	m.Objects[Key(path)] = &Object{Dir: dir, DACL: dacl}
}

// Get returns the object at path, or nil.
func (m *Model) Get(path string) *Object { return m.Objects[Key(path)] }

// ApplyPlan adds a plan's placeholders and ACEs the way Apply does on disk.
func (m *Model) ApplyPlan(pl Plan) {
	for _, p := range pl.Mkdirs {
		if m.Get(p) == nil {
			m.Put(p, true)
		}
	}
	for _, f := range pl.Files {
		if m.Get(f.Path) == nil {
			m.Put(f.Path, false)
		}
	}
	for _, p := range pl.Unlabel {
		if o := m.Get(p); o != nil && o.Label != nil && (*o.Label == ProtectedLabel || *o.Label == ProtectedFileLabel) {
			o.Label = nil
		}
	}
	for _, p := range pl.Unhide {
		o := m.Get(p)
		if o == nil {
			continue
		}
		if o.Label != nil && hiddenLabel(*o.Label) {
			o.Label = nil
		}
		if pl.UnhideSID != "" {
			o.DACL = slices.DeleteFunc(o.DACL, func(a ACE) bool { return hiddenACE(a, pl.UnhideSID) })
		}
	}
	for _, e := range pl.Remove {
		if o := m.Get(e.Path); o != nil {
			o.DACL = slices.DeleteFunc(o.DACL, func(a ACE) bool { return a == e.ACE })
		}
	}
	for _, l := range pl.Labels {
		if o := m.Get(l.Path); o != nil {
			lbl := l.Label
			o.Label = &lbl
		}
	}
	for _, e := range pl.Entries {
		o := m.Get(e.Path)
		if o == nil {
			continue
		}
		d := &DACL{}
		for _, a := range o.DACL {
			d.ACEs = append(d.ACEs, RawACE{Text: a.SDDL(), Parsed: a, OK: true})
		}
		d.Add(e.ACE)
		o.DACL = o.DACL[:0]
		for _, r := range d.ACEs {
			o.DACL = append(o.DACL, r.Parsed)
		}
	}
}

// Effective returns the DACL Windows would evaluate for path: its explicit
// ACEs, then the ACEs inherited from its parent, then from its grandparent
// and so on.
//
// Rules ("ACE Inheritance Rules",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/ace-inheritance-rules):
// an OBJECT_INHERIT ACE is effective on non-container children and passes
// on to containers as inherit-only, so it reaches files at any depth; a
// CONTAINER_INHERIT ACE is effective on child containers at any depth;
// NO_PROPAGATE_INHERIT limits either to the immediate children; an
// INHERIT_ONLY ACE does not apply to the object carrying it.
// Order ("Order of ACEs in a DACL",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/order-of-aces-in-a-dacl):
// explicit ACEs precede inherited ones, and inherited ACEs follow the order
// of inheritance - parent's first, then grandparent's.
func (m *Model) Effective(path string) []ACE {
	o := m.Get(path)
	if o == nil {
		return nil
	}
	var out []ACE
	for _, a := range o.DACL {
		if a.Flags&InheritOnly == 0 {
			out = append(out, a)
		}
	}
	depth := 0
	for p := path; ; {
		parent := Parent(p)
		if SamePath(parent, p) {
			break
		}
		p = parent
		depth++
		anc := m.Get(p)
		if anc == nil {
			continue
		}
		for _, a := range anc.DACL {
			if a.Flags&NoPropagate != 0 && depth > 1 {
				continue
			}
			if o.Dir && a.Flags&ContainerInherit != 0 || !o.Dir && a.Flags&ObjectInherit != 0 {
				out = append(out, ACE{Deny: a.Deny, Mask: a.Mask, SID: a.SID, Flags: Inherited})
			}
		}
	}
	return out
}

// EffectiveLabel returns the mandatory label Windows evaluates for path:
// its explicit label unless inherit-only, else the label inherited from the
// nearest ancestor carrying an inheritable one (the same inheritance rules
// as for ACEs), else DefaultLabel ("Mandatory Integrity Control": objects
// without a label are treated as Medium, and the system creates objects
// with NO_WRITE_UP).
func (m *Model) EffectiveLabel(path string) Label {
	o := m.Get(path)
	if o == nil {
		return DefaultLabel
	}
	if o.Label != nil && o.Label.Flags&InheritOnly == 0 {
		return *o.Label
	}
	depth := 0
	for p := path; ; {
		parent := Parent(p)
		if SamePath(parent, p) {
			return DefaultLabel
		}
		p = parent
		depth++
		anc := m.Get(p)
		if anc == nil || anc.Label == nil {
			continue
		}
		l := *anc.Label
		if l.Flags&NoPropagate != 0 && depth > 1 {
			return DefaultLabel
		}
		if o.Dir && l.Flags&ContainerInherit != 0 || !o.Dir && l.Flags&ObjectInherit != 0 {
			return Label{Level: l.Level, Policy: l.Policy, Flags: Inherited}
		}
		// The nearest labelled ancestor decides: its label replaced
		// whatever it inherited itself.
		return DefaultLabel
	}
}

// check walks a DACL for one set of SIDs and reports whether every bit of
// desired is granted.
//
// Rule ("How DACLs Control Access to an Object",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/how-dacls-control-access-to-an-object):
// the system examines ACEs in sequence until an access-denied ACE denies
// any requested right not yet granted, or access-allowed ACEs have granted
// all of them, or the list ends (then access is denied). ACEs whose SID is
// not in the token are skipped. An object with no DACL entry at all grants
// nothing.
func check(dacl []ACE, sids []string, desired uint32) bool {
	if desired == 0 {
		return true
	}
	granted := uint32(0)
	for _, a := range dacl {
		if !hasSID(sids, a.SID) {
			continue
		}
		if a.Deny {
			if a.Mask&desired&^granted != 0 {
				return false
			}
			continue
		}
		granted |= a.Mask & desired
		if granted == desired {
			return true
		}
	}
	return false
}

func hasSID(sids []string, s string) bool {
	s = canonicalSID(s)
	for _, x := range sids {
		if strings.EqualFold(canonicalSID(x), s) {
			return true
		}
	}
	return false
}

// sddlAliases are the SDDL SID strings the model meets
// (https://learn.microsoft.com/en-us/windows/win32/secauthz/sid-strings).
var sddlAliases = map[string]string{
	"WD": Everyone, "SY": "S-1-5-18", "BA": "S-1-5-32-544", "BU": "S-1-5-32-545", "AU": "S-1-5-11",
}

func canonicalSID(s string) string {
	if v, ok := sddlAliases[strings.ToUpper(s)]; ok {
		return v
	}
	return s
}

// AccessCheck decides whether tok gets desired on path.
//
// Rule (mandatory integrity, see label.go): before the DACL is looked at,
// a token below the object's integrity level loses every right its label's
// policy withholds; desired must lie within what is left.
//
// Rule ("Restricted Tokens",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/restricted-tokens):
// for a token with restricting SIDs the system performs two access checks,
// one with the enabled SIDs and one with the restricting SIDs, and grants
// only what both allow. With WRITE_RESTRICTED the second check applies only
// to write access (CreateRestrictedToken); the model's WriteMask says which
// bits that is.
func (m *Model) AccessCheck(tok Token, path string, desired uint32) bool {
	il := tok.Integrity
	if il == 0 {
		il = MediumIL
	}
	if desired&^mandatoryAllowed(il, m.EffectiveLabel(path)) != 0 {
		return false
	}
	dacl := m.Effective(path)
	if !check(dacl, tok.SIDs, desired) {
		return false
	}
	if len(tok.Restricting) == 0 {
		return true
	}
	second := desired
	if tok.WriteRestricted {
		wm := m.WriteMask
		if wm == 0 {
			wm = WriteAccess
		}
		second &= wm
	}
	return check(dacl, tok.Restricting, second)
}

// Operations the policy table speaks about.

// CanRead: open an existing file for reading (FILE_READ_DATA|SYNCHRONIZE).
func (m *Model) CanRead(tok Token, path string) bool {
	return m.AccessCheck(tok, path, FileReadData|Synchronize)
}

// CanWrite: open an existing file for writing (FILE_WRITE_DATA).
func (m *Model) CanWrite(tok Token, path string) bool {
	return m.AccessCheck(tok, path, FileWriteData)
}

// CanCreate: create a file (FILE_ADD_FILE) or directory
// (FILE_ADD_SUBDIRECTORY) in dir ("File Access Rights Constants",
// https://learn.microsoft.com/en-us/windows/win32/fileio/file-access-rights-constants).
func (m *Model) CanCreate(tok Token, dir string, isDir bool) bool {
	right := uint32(FileAddFile)
	if isDir {
		right = FileAddSubdirectory
	}
	return m.AccessCheck(tok, dir, right)
}

// CanDelete: delete path. The file system grants DELETE on an object when
// the object's DACL grants it or when the parent directory grants
// FILE_DELETE_CHILD ([MS-FSA] 2.1.5.1.2.1 "Algorithm to Check Access to an
// Existing File",
// https://learn.microsoft.com/en-us/openspecs/windows_protocols/ms-fsa/;
// FILE_DELETE_CHILD in "File Access Rights Constants").
func (m *Model) CanDelete(tok Token, path string) bool {
	return m.AccessCheck(tok, path, Delete) || m.AccessCheck(tok, Parent(path), FileDeleteChild)
}

// CanRename: rename src to dst. The source must be opened with DELETE
// access (granted as for CanDelete) and the destination directory must
// allow adding a file or subdirectory ([MS-FSA] 2.1.5.14.11
// FileRenameInformation; SetFileInformationByHandle FileRenameInfo needs
// DELETE access). Replacing an existing dst also needs delete access to it.
func (m *Model) CanRename(tok Token, src, dst string) bool {
	o := m.Get(src)
	if o == nil || !m.CanDelete(tok, src) {
		return false
	}
	if !m.CanCreate(tok, Parent(dst), o.Dir) {
		return false
	}
	if m.Get(dst) != nil && !m.CanDelete(tok, dst) {
		return false
	}
	return true
}
