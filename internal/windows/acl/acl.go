// Package acl plans and merges the Windows file ACEs of agentbox's
// unelevated sandbox, and models Windows' access check to verify the plan.
//
// Everything here is platform-free: paths are Windows strings handled
// case-insensitively whatever GOOS the code runs on, ACEs are plain values
// rendered as SDDL, and applying them goes through a [Store] that the
// Windows backend implements with GetNamedSecurityInfo/SetNamedSecurityInfo.
//
// # The plan
//
// The synthetic workspace SID gets an inheritable allow ACE ([AllowWrite],
// OI|CI) on each writable root. Each protected path gets an inheritable deny
// ACE ([DenyWrite]) for the same SID, and every directory from the writable
// root down to the protected path's parent gets a non-inheritable deny of
// DELETE|FILE_DELETE_CHILD ([DenyRenameAside]) so the protected entry cannot
// be deleted, renamed aside or have its parent chain renamed aside.
//
// Deny ACEs only matter in the restricted pass of a write-restricted token:
// the synthetic SID is never among the token's normal SIDs. See model.go for
// the access-check model and the Microsoft documentation each rule follows.
package acl

import (
	"fmt"
	"strconv"
	"strings"
)

// File access rights (winnt.h; "File Access Rights Constants",
// https://learn.microsoft.com/en-us/windows/win32/fileio/file-access-rights-constants).
const (
	FileReadData        = 0x0001 // FILE_LIST_DIRECTORY on a directory
	FileWriteData       = 0x0002 // FILE_ADD_FILE on a directory
	FileAppendData      = 0x0004 // FILE_ADD_SUBDIRECTORY on a directory
	FileReadEA          = 0x0008
	FileWriteEA         = 0x0010
	FileExecute         = 0x0020 // FILE_TRAVERSE on a directory
	FileDeleteChild     = 0x0040
	FileReadAttributes  = 0x0080
	FileWriteAttributes = 0x0100
	Delete              = 0x00010000
	ReadControl         = 0x00020000
	WriteDAC            = 0x00040000
	WriteOwner          = 0x00080000
	Synchronize         = 0x00100000

	FileAddFile         = FileWriteData
	FileAddSubdirectory = FileAppendData

	FileGenericRead    = ReadControl | FileReadData | FileReadAttributes | FileReadEA | Synchronize
	FileGenericWrite   = ReadControl | FileWriteData | FileWriteAttributes | FileWriteEA | FileAppendData | Synchronize
	FileGenericExecute = ReadControl | FileReadAttributes | FileExecute | Synchronize
	FileAllAccess      = 0x001F01FF
)

// Masks agentbox grants and denies.
const (
	// AllowWrite is read, write, execute and delete (of entries and of
	// children) - everything but changing the DACL or owner.
	AllowWrite = FileGenericRead | FileGenericWrite | FileGenericExecute | Delete | FileDeleteChild
	// DenyWrite covers every right that modifies an object or its
	// children. It leaves out READ_CONTROL and SYNCHRONIZE, which are part
	// of FILE_GENERIC_WRITE but which every read also asks for.
	DenyWrite = FileWriteData | FileAppendData | FileWriteEA | FileWriteAttributes |
		FileDeleteChild | Delete | WriteDAC | WriteOwner
	// DenyRenameAside, non-inheritable, on the directories that lead to a
	// protected path: moving any of them moves the protected path with it.
	DenyRenameAside = Delete | FileDeleteChild
)

// ACE inheritance flags (ACE_HEADER.AceFlags).
const (
	ObjectInherit    = 0x01 // OI
	ContainerInherit = 0x02 // CI
	NoPropagate      = 0x04 // NP
	InheritOnly      = 0x08 // IO
	Inherited        = 0x10 // ID
)

// ACE is one allow or deny entry for a SID, as agentbox reasons about it.
type ACE struct {
	Deny  bool
	Flags uint8
	Mask  uint32
	SID   string // string form, S-1-...; well-known aliases as in SDDL ("WD")
}

// SDDL renders the ACE as an SDDL ace string, e.g. "(A;OICI;0x1301ff;;;S-1-5-21-1-2-3-4)".
func (a ACE) SDDL() string {
	t := "A"
	if a.Deny {
		t = "D"
	}
	return fmt.Sprintf("(%s;%s;0x%x;;;%s)", t, flagString(a.Flags), a.Mask, a.SID)
}

func (a ACE) String() string { return a.SDDL() }

var flagNames = []struct {
	bit  uint8
	name string
}{{ObjectInherit, "OI"}, {ContainerInherit, "CI"}, {NoPropagate, "NP"}, {InheritOnly, "IO"}, {Inherited, "ID"}}

func flagString(f uint8) string {
	var b strings.Builder
	for _, n := range flagNames {
		if f&n.bit != 0 {
			b.WriteString(n.name)
		}
	}
	return b.String()
}

func parseFlags(s string) (uint8, bool) {
	var f uint8
	for len(s) > 0 {
		if len(s) < 2 {
			return 0, false
		}
		found := false
		for _, n := range flagNames {
			if strings.EqualFold(s[:2], n.name) {
				f |= n.bit
				found = true
			}
		}
		if !found {
			return 0, false // SA, FA (audit flags) or unknown: not ours
		}
		s = s[2:]
	}
	return f, true
}

// SDDL access-right abbreviations that Windows' ConvertSecurityDescriptor
// ToStringSecurityDescriptor emits for file DACLs ("ACE Strings",
// https://learn.microsoft.com/en-us/windows/win32/secauthz/ace-strings).
var rightNames = map[string]uint32{
	"GA": 0x10000000, "GR": 0x80000000, "GW": 0x40000000, "GX": 0x20000000,
	"RC": ReadControl, "SD": Delete, "WD": WriteDAC, "WO": WriteOwner,
	"FA": FileAllAccess, "FR": FileGenericRead, "FW": FileGenericWrite, "FX": FileGenericExecute,
	"CC": 0x1, "DC": 0x2, "LC": 0x4, "SW": 0x8, "RP": 0x10, "WP": 0x20, "DT": 0x40, "LO": 0x80, "CR": 0x100,
}

// parseRights reads an SDDL rights field: hex, decimal or abbreviations.
func parseRights(s string) (uint32, bool) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		return uint32(v), err == nil
	}
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		v, err := strconv.ParseUint(s, 10, 32)
		return uint32(v), err == nil
	}
	var m uint32
	for len(s) > 0 {
		if len(s) < 2 {
			return 0, false
		}
		v, ok := rightNames[strings.ToUpper(s[:2])]
		if !ok {
			return 0, false
		}
		m |= v
		s = s[2:]
	}
	return m, true
}

// genericToFile maps generic rights to file rights, as the file object
// type's GENERIC_MAPPING does ("File Security and Access Rights",
// https://learn.microsoft.com/en-us/windows/win32/fileio/file-security-and-access-rights).
func genericToFile(m uint32) uint32 {
	const gr, gw, gx, ga = 0x80000000, 0x40000000, 0x20000000, 0x10000000
	out := m &^ (gr | gw | gx | ga)
	if m&gr != 0 {
		out |= FileGenericRead
	}
	if m&gw != 0 {
		out |= FileGenericWrite
	}
	if m&gx != 0 {
		out |= FileGenericExecute
	}
	if m&ga != 0 {
		out |= FileAllAccess
	}
	return out
}

// ParseACE parses a plain allow or deny SDDL ace string. ok is false for
// any other ACE type (object, conditional, audit, ...); callers keep those
// verbatim.
func ParseACE(s string) (ACE, bool) {
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return ACE{}, false
	}
	f := strings.Split(s[1:len(s)-1], ";")
	if len(f) != 6 || f[3] != "" || f[4] != "" {
		return ACE{}, false
	}
	var a ACE
	switch strings.ToUpper(f[0]) {
	case "A":
	case "D":
		a.Deny = true
	default:
		return ACE{}, false
	}
	flags, ok := parseFlags(f[1])
	if !ok {
		return ACE{}, false
	}
	mask, ok := parseRights(f[2])
	if !ok {
		return ACE{}, false
	}
	a.Flags, a.Mask, a.SID = flags, genericToFile(mask), f[5]
	return a, true
}

// Everyone is the well-known SID S-1-1-0 ("WD" in SDDL).
const Everyone = "S-1-1-0"

// RestrictingSIDs is the sandbox token's restricting SID list, in the
// order CreateRestrictedToken receives it: Everyone (so objects the system
// opens to everybody, like the NUL device, stay usable), the logon SID (the
// window station, desktop and console grant it) and the sandbox SIDs (the
// ACEs agentbox plans grant or deny them). winapi.RestrictedToken builds
// its token from this list and the model tests evaluate the same list.
func RestrictingSIDs(logonSID string, sandboxSIDs ...string) []string {
	return append([]string{Everyone, logonSID}, sandboxSIDs...)
}

// SandboxToken is the model of the token winapi.RestrictedToken builds
// from a token whose enabled SIDs are sids.
func SandboxToken(sids []string, logonSID string, sandboxSIDs ...string) Token {
	return Token{SIDs: sids, Restricting: RestrictingSIDs(logonSID, sandboxSIDs...), WriteRestricted: true}
}
