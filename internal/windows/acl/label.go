package acl

import (
	"fmt"
	"strconv"
	"strings"
)

// Mandatory integrity labels ("Mandatory Integrity Control",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/mandatory-integrity-control).
//
// Why agentbox uses them: a WRITE_RESTRICTED token's second access check
// covers only write access, and on a real host DELETE and
// FILE_DELETE_CHILD were seen to escape it (Codex issue #32915): the
// command could delete or rename whatever the user could. The mandatory
// integrity check runs before the DACL check for every access, and for a
// caller whose integrity level is below the object's it grants at most the
// object type's mapped read and execute rights when the object's label
// carries SYSTEM_MANDATORY_LABEL_NO_WRITE_UP ([MS-DTYP] 2.5.3.3
// "MandatoryIntegrityCheck Algorithm Pseudocode",
// https://learn.microsoft.com/en-us/openspecs/windows_protocols/ms-dtyp/ae69a089-473d-4c23-bf3d-7a12a9d11123).
// DELETE, FILE_DELETE_CHILD, WRITE_DAC and WRITE_OWNER are in neither
// mapping, so a Low-integrity token cannot delete, rename or re-ACL an
// object at Medium, which is what every unlabelled object is ("Objects
// that lack an integrity label are treated as medium").

// Integrity levels: the RID of the mandatory label SID S-1-16-RID
// ("Well-known SIDs").
const (
	UntrustedIL = 0x0000
	LowIL       = 0x1000
	MediumIL    = 0x2000
	HighIL      = 0x3000
	SystemIL    = 0x4000
)

// Mandatory policy bits of a SYSTEM_MANDATORY_LABEL_ACE's mask.
const (
	NoWriteUp   = 0x1 // SYSTEM_MANDATORY_LABEL_NO_WRITE_UP, "NW"
	NoReadUp    = 0x2 // SYSTEM_MANDATORY_LABEL_NO_READ_UP, "NR"
	NoExecuteUp = 0x4 // SYSTEM_MANDATORY_LABEL_NO_EXECUTE_UP, "NX"
)

// Label is a mandatory label ACE as agentbox reasons about it.
type Label struct {
	Level  uint32 // integrity RID
	Flags  uint8  // inheritance flags, as for ACE.Flags
	Policy uint32 // NoWriteUp | NoReadUp | NoExecuteUp
}

// DefaultLabel is how Windows treats an object without a label.
var DefaultLabel = Label{Level: MediumIL, Policy: NoWriteUp}

var levelAliases = map[uint32]string{UntrustedIL: "S-1-16-0", LowIL: "LW", MediumIL: "ME", HighIL: "HI", SystemIL: "SI"}

// SDDL renders the label as an SDDL ace string, e.g. "(ML;OICI;NW;;;LW)".
func (l Label) SDDL() string {
	sid, ok := levelAliases[l.Level]
	if !ok {
		sid = fmt.Sprintf("S-1-16-%d", l.Level)
	}
	var pol strings.Builder
	for _, p := range []struct {
		bit  uint32
		name string
	}{{NoWriteUp, "NW"}, {NoReadUp, "NR"}, {NoExecuteUp, "NX"}} {
		if l.Policy&p.bit != 0 {
			pol.WriteString(p.name)
		}
	}
	return fmt.Sprintf("(ML;%s;%s;;;%s)", flagString(l.Flags), pol.String(), sid)
}

func (l Label) String() string { return l.SDDL() }

// SACL is the "S:" SDDL part that sets exactly this label.
func (l Label) SACL() string { return "S:" + l.SDDL() }

// ParseLabel returns the first mandatory label ACE of an SDDL string's
// SACL part, the one Windows evaluates. ok is false when there is none or
// it cannot be read.
func ParseLabel(sddl string) (l Label, ok bool) {
	i := strings.Index(sddl, "S:")
	if i < 0 {
		return Label{}, false
	}
	s := sddl[i+2:]
	for {
		j := strings.Index(s, "(")
		if j < 0 {
			return Label{}, false
		}
		k := strings.Index(s[j:], ")")
		if k < 0 {
			return Label{}, false
		}
		f := strings.Split(s[j+1:j+k], ";")
		s = s[j+k+1:]
		if len(f) != 6 || !strings.EqualFold(f[0], "ML") {
			continue
		}
		flags, ok := parseFlags(f[1])
		if !ok {
			return Label{}, false
		}
		pol, ok := parseLabelPolicy(f[2])
		if !ok {
			return Label{}, false
		}
		lvl, ok := parseLevel(f[5])
		if !ok {
			return Label{}, false
		}
		return Label{Level: lvl, Flags: flags, Policy: pol}, true
	}
}

func parseLabelPolicy(s string) (uint32, bool) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		return uint32(v), err == nil
	}
	var p uint32
	for len(s) > 0 {
		if len(s) < 2 {
			return 0, false
		}
		switch strings.ToUpper(s[:2]) {
		case "NW":
			p |= NoWriteUp
		case "NR":
			p |= NoReadUp
		case "NX":
			p |= NoExecuteUp
		default:
			return 0, false
		}
		s = s[2:]
	}
	return p, true
}

func parseLevel(s string) (uint32, bool) {
	for v, a := range levelAliases {
		if strings.EqualFold(a, s) {
			return v, true
		}
	}
	if rest, ok := strings.CutPrefix(strings.ToUpper(s), "S-1-16-"); ok {
		v, err := strconv.ParseUint(rest, 10, 32)
		return uint32(v), err == nil
	}
	return 0, false
}

// Labels agentbox's unelevated mode writes.
var (
	// RootLabel goes on every writable root: Low, inherited by everything
	// below, so the Low-integrity command may write there.
	RootLabel = Label{Level: LowIL, Flags: ObjectInherit | ContainerInherit, Policy: NoWriteUp}
	// ProtectedLabel goes on protected directories: an explicit Medium
	// label that replaces the Low one they would inherit from the root.
	ProtectedLabel = Label{Level: MediumIL, Flags: ObjectInherit | ContainerInherit, Policy: NoWriteUp}
	// ProtectedFileLabel is ProtectedLabel for a file or link.
	ProtectedFileLabel = Label{Level: MediumIL, Policy: NoWriteUp}
)

// mandatoryAllowed is what the mandatory integrity check leaves grantable
// to a token at integrity level tokenIL on an object labelled l, following
// [MS-DTYP] 2.5.3.3: everything when the token is at or above the
// object's level; otherwise NO_WRITE_UP leaves only the mapped read and
// execute rights (READ_CONTROL and SYNCHRONIZE among them), NO_READ_UP
// takes the read rights away and NO_EXECUTE_UP the execute right.
func mandatoryAllowed(tokenIL uint32, l Label) uint32 {
	allowed := ^uint32(0)
	if tokenIL >= l.Level {
		return allowed
	}
	const always = ReadControl | Synchronize
	if l.Policy&NoWriteUp != 0 {
		allowed &= FileGenericRead | FileGenericExecute
	}
	if l.Policy&NoReadUp != 0 {
		allowed &^= FileGenericRead &^ always
	}
	if l.Policy&NoExecuteUp != 0 {
		allowed &^= FileExecute
	}
	return allowed
}
