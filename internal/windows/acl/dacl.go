package acl

import (
	"errors"
	"fmt"
	"strings"
)

// DACL is a parsed "D:" part of an SDDL string. ACEs agentbox does not
// understand (object, conditional, callback ACEs) are kept as raw strings
// in their original position.
type DACL struct {
	Flags string // "P", "AI", "PAI", ... (SE_DACL_PROTECTED and friends)
	Null  bool   // NO_ACCESS_CONTROL: a NULL DACL, which grants everything
	ACEs  []RawACE
}

// RawACE is one ace string, and its parsed form when it is a plain allow or
// deny ACE.
type RawACE struct {
	Text   string
	Parsed ACE
	OK     bool
}

// Protected reports whether the DACL blocks inheritance from the parent.
func (d *DACL) Protected() bool { return strings.Contains(strings.ToUpper(d.Flags), "P") }

// ParseDACL reads the DACL part of an SDDL security descriptor string
// (other parts such as O: or G: are ignored).
func ParseDACL(sddl string) (*DACL, error) {
	i := strings.Index(sddl, "D:")
	if i < 0 {
		return nil, fmt.Errorf("sddl %q has no DACL part", sddl)
	}
	s := sddl[i+2:]
	d := &DACL{}
	j := strings.IndexByte(s, '(')
	head := s
	if j >= 0 {
		head = s[:j]
		s = s[j:]
	} else {
		s = ""
	}
	// The flags end where the next part (S:, O:, G:) begins.
	if k := strings.IndexAny(head, ":"); k > 0 {
		head = head[:k-1]
	}
	if strings.EqualFold(head, "NO_ACCESS_CONTROL") {
		d.Null = true
		return d, nil
	}
	d.Flags = head
	for len(s) > 0 && s[0] == '(' {
		depth, end := 0, -1
		for k := 0; k < len(s); k++ {
			switch s[k] {
			case '(':
				depth++
			case ')':
				depth--
			}
			if depth == 0 {
				end = k
				break
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("sddl %q: unbalanced parentheses", sddl)
		}
		text := s[:end+1]
		a, ok := ParseACE(text)
		d.ACEs = append(d.ACEs, RawACE{Text: text, Parsed: a, OK: ok})
		s = s[end+1:]
	}
	return d, nil
}

// String renders the DACL as SDDL ("D:PAI(...)(...)").
func (d *DACL) String() string {
	if d.Null {
		return "D:NO_ACCESS_CONTROL"
	}
	var b strings.Builder
	b.WriteString("D:" + d.Flags)
	for _, a := range d.ACEs {
		b.WriteString(a.Text)
	}
	return b.String()
}

// Explicit renders the DACL for writing back: an unprotected DACL without
// its inherited entries, which SetNamedSecurityInfo recomputes from the
// parent (passing them back would risk turning them into explicit copies
// that outlive a change of the parent).
func (d *DACL) Explicit() string {
	if d.Null || d.Protected() {
		return d.String()
	}
	e := &DACL{Flags: d.Flags}
	for _, a := range d.ACEs {
		inherited := a.OK && a.Parsed.Flags&Inherited != 0 ||
			!a.OK && strings.Contains(strings.ToUpper(aceFlagsField(a.Text)), "ID")
		if !inherited {
			e.ACEs = append(e.ACEs, a)
		}
	}
	return e.String()
}

// Has reports whether the DACL already carries want as an explicit
// (non-inherited) ACE of the same kind, SID and inheritance flags with at
// least want's rights. This is the no-reapply check: when it holds, the
// path is left alone and, for an inheritable grant, its tree is not walked.
func (d *DACL) Has(want ACE) bool {
	for _, r := range d.ACEs {
		a := r.Parsed
		if !r.OK || a.Flags&Inherited != 0 {
			continue
		}
		if a.Deny == want.Deny && strings.EqualFold(a.SID, want.SID) &&
			a.Flags&^Inherited == want.Flags && a.Mask&want.Mask == want.Mask {
			return true
		}
	}
	return false
}

// ErrNullDACL is returned for an object whose DACL is NULL: adding an ACE
// would take away everyone else's access, so agentbox refuses.
var ErrNullDACL = errors.New("object has a NULL DACL (everyone has full access); agentbox will not change it")

// Add inserts want where Windows' canonical order puts an explicit ACE
// (explicit deny ACEs first, then explicit allow ACEs, then inherited ones:
// "Order of ACEs in a DACL",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/order-of-aces-in-a-dacl).
// It reports false when the ACE was already there.
func (d *DACL) Add(want ACE) (bool, error) {
	if d.Null {
		return false, ErrNullDACL
	}
	if d.Has(want) {
		return false, nil
	}
	want.Flags &^= Inherited
	at := len(d.ACEs)
	for i, r := range d.ACEs {
		inherited := r.OK && r.Parsed.Flags&Inherited != 0 ||
			!r.OK && strings.Contains(strings.ToUpper(aceFlagsField(r.Text)), "ID")
		if inherited || want.Deny && !(r.OK && r.Parsed.Deny) {
			at = i
			break
		}
	}
	d.ACEs = append(d.ACEs, RawACE{})
	copy(d.ACEs[at+1:], d.ACEs[at:])
	d.ACEs[at] = RawACE{Text: want.SDDL(), Parsed: want, OK: true}
	return true, nil
}

// RemoveSID drops every explicit ACE for sid and reports how many it
// dropped (agentbox cleanup).
func (d *DACL) RemoveSID(sid string) int {
	n := 0
	out := d.ACEs[:0]
	for _, r := range d.ACEs {
		if r.OK && r.Parsed.Flags&Inherited == 0 && strings.EqualFold(r.Parsed.SID, sid) {
			n++
			continue
		}
		out = append(out, r)
	}
	d.ACEs = out
	return n
}

// RemoveACE removes the explicit ACEs exactly equal to a (type, flags,
// mask, SID) and returns how many it removed. Cleanup uses it for the
// user-SID guards: the user's own ACEs must never go.
func (d *DACL) RemoveACE(a ACE) int {
	n := 0
	out := d.ACEs[:0]
	for _, r := range d.ACEs {
		p := r.Parsed
		if r.OK && p.Flags&Inherited == 0 && p.Deny == a.Deny && p.Flags == a.Flags && p.Mask == a.Mask &&
			strings.EqualFold(canonicalSID(p.SID), canonicalSID(a.SID)) {
			n++
			continue
		}
		out = append(out, r)
	}
	d.ACEs = out
	return n
}

func aceFlagsField(text string) string {
	f := strings.SplitN(strings.Trim(text, "()"), ";", 3)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TokenDefaultDACL is the SDDL of the default DACL agentbox gives the
// restricted token. Objects a sandboxed process creates without an explicit
// security descriptor (pipes, events, sections, its own process and
// threads) get this DACL; the Windows default names only the user and
// SYSTEM, which the restricted pass of a write-restricted token does not
// match, so a child could not open the pipes it just created. Granting the
// logon SID and the sandbox SID (restricting SIDs the child holds) fixes
// that. Everyone is deliberately absent: it would hand those objects to
// every principal on the machine (other users, services, other sandboxes
// with another SID that are not of this logon session).
func TokenDefaultDACL(userSID, logonSID, sandboxSID string) string {
	return "D:" + ACE{Mask: 0x10000000, SID: userSID}.SDDL() +
		ACE{Mask: 0x10000000, SID: "SY"}.SDDL() +
		ACE{Mask: 0x10000000, SID: logonSID}.SDDL() +
		ACE{Mask: 0x10000000, SID: sandboxSID}.SDDL()
}

// DesktopAllAccess is DESKTOP_ALL_ACCESS in effect: every desktop-specific
// right (DESKTOP_READOBJECTS through DESKTOP_SWITCHDESKTOP, 0x1FF) and the
// standard rights (DELETE, READ_CONTROL, WRITE_DAC, WRITE_OWNER).
const DesktopAllAccess = 0x000F01FF

// DesktopDACL is the SDDL of the private desktop each sandboxed run gets:
// protected (nothing inherited from the window station) and granting only
// logonSID. In unelevated mode that is the user's logon SID (agentbox
// itself, and the child through its restricting SIDs); in elevated mode the
// runner's. No other process of the session, the user's shell included,
// can open the desktop, and the child cannot reach the user's desktop
// through window messages, hooks or journal playback.
//
// Once created, the desktop gets UserObjectLabel: the unelevated command
// runs at Low integrity and opens the desktop for writing (creating
// windows) at start-up; an unlabelled desktop would be Medium and refuse
// it. Other Low processes still need the logon SID in the DACL to open it.
func DesktopDACL(logonSID string, more ...string) string {
	return userObjectSD(DesktopAllAccess, append([]string{logonSID}, more...))
}

// StationAllAccess is WINSTA_ALL_ACCESS (0x37F) plus the standard rights.
const StationAllAccess = 0x000F037F

// StationDACL is the SDDL of the window station agentbox creates when its
// own is not interactive (a service, an OpenSSH session, session 0): there
// the station's DACL does not let the command (or agentbox-runner, a new
// logon) connect, and every process that loads USER32 dies with
// STATUS_DLL_INIT_FAILED (0xC0000142). Protected, granting only sids;
// labelled UserObjectLabel like the desktop.
func StationDACL(sids ...string) string { return userObjectSD(StationAllAccess, sids) }

func userObjectSD(mask uint32, sids []string) string {
	var b strings.Builder
	b.WriteString("D:P")
	for _, s := range sids {
		b.WriteString(ACE{Mask: mask, SID: s}.SDDL())
	}
	return b.String()
}

// UserObjectLabel is the label agentbox sets on the window stations and
// desktops it creates, after creating them (SetSecurityInfo with
// LABEL_SECURITY_INFORMATION, as Chromium's sandbox does for its
// alternate desktop), so the Low-integrity command can use them.
var UserObjectLabel = Label{Level: LowIL, Policy: NoWriteUp}
