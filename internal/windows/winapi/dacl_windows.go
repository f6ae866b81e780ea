package winapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
)

// FileStore reads and writes file and directory DACLs as SDDL; it is the
// acl.Store (and acl.LinkStore: link objects by handle) the sandbox
// applies its plan through. Paths beyond MAX_PATH are passed in their
// \\?\ form (acl.LongPath): unlike package os, these calls do not add it.
type FileStore struct{}

// GetDACL returns path's DACL ("D:...").
func (FileStore) GetDACL(path string) (string, error) {
	return getNamed(path, daclPart)
}

// SetDACL writes path's DACL. Windows recomputes inherited entries and
// propagates inheritable ones to the whole subtree: this is the slow call
// acl.Apply avoids when nothing is missing.
func (FileStore) SetDACL(path, sddl string, protected bool) error {
	return setNamed(path, daclPart, sddl, protected)
}

// Mkdir creates a directory (fs.ErrExist when it exists).
func (FileStore) Mkdir(path string) error { return os.Mkdir(path, 0o755) }

// CreateFile creates path with content (acl.FileMaker, for placeholder
// files); fs.ErrExist when something is there, link or not.
func (FileStore) CreateFile(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// IsLink reports whether path itself is a reparse point (a symbolic link,
// a junction or another name surrogate); GetFileAttributes does not follow
// it.
func (FileStore) IsLink(path string) (bool, error) {
	p, err := windows.UTF16PtrFromString(acl.LongPath(path))
	if err != nil {
		return false, err
	}
	attrs, err := windows.GetFileAttributes(p)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
			return false, &fs.PathError{Op: "GetFileAttributes", Path: path, Err: fs.ErrNotExist}
		}
		return false, &fs.PathError{Op: "GetFileAttributes", Path: path, Err: err}
	}
	return attrs&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0, nil
}

// openLink opens the link object at path itself, not its target
// (FILE_FLAG_OPEN_REPARSE_POINT; FILE_FLAG_BACKUP_SEMANTICS lets it open
// directories and junctions).
func openLink(path string, access uint32) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(acl.LongPath(path))
	if err != nil {
		return 0, err
	}
	h, err := windows.CreateFile(p, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return 0, &fs.PathError{Op: "CreateFile(FILE_FLAG_OPEN_REPARSE_POINT)", Path: path, Err: err}
	}
	return h, nil
}

// GetLinkDACL reads the DACL of the link object at path.
func (FileStore) GetLinkDACL(path string) (string, error) {
	return getLink(path, daclPart)
}

// SetLinkDACL writes the DACL of the link object at path through a handle
// opened on the link itself (SetNamedSecurityInfo would reach the target).
func (FileStore) SetLinkDACL(path, sddl string, protected bool) error {
	return setLink(path, daclPart, sddl, protected)
}

var _ acl.LinkStore = FileStore{}

// daclArgs parses the DACL to write at path, with the information flags
// that say whether it inherits from the parent.
func daclArgs(path, sddl string, protected bool) (setArgs, error) {
	dacl, err := aclFromSDDL(sddl, (*windows.SECURITY_DESCRIPTOR).DACL)
	if err != nil {
		return setArgs{}, fmt.Errorf("DACL for %s: %w", path, err)
	}
	info := windows.SECURITY_INFORMATION(windows.DACL_SECURITY_INFORMATION)
	if protected {
		info |= windows.PROTECTED_DACL_SECURITY_INFORMATION
	} else {
		info |= windows.UNPROTECTED_DACL_SECURITY_INFORMATION
	}
	return setArgs{info: info, dacl: dacl}, nil
}

// GetLabel returns path's mandatory label part ("S:(ML;...)", or no ACE
// when it has none). Reading it needs only READ_CONTROL.
func (FileStore) GetLabel(path string) (string, error) {
	return getNamed(path, labelPart)
}

// SetLabel sets path's explicit mandatory label ("S:" removes it);
// Windows propagates an inheritable label through the subtree. It needs
// WRITE_OWNER, and a label above the caller's own integrity level fails.
func (FileStore) SetLabel(path, sacl string) error {
	return setNamed(path, labelPart, sacl, false)
}

// GetLinkLabel reads the label of the link object at path.
func (FileStore) GetLinkLabel(path string) (string, error) {
	return getLink(path, labelPart)
}

// SetLinkLabel sets the label of the link object at path itself.
func (FileStore) SetLinkLabel(path, sacl string) error {
	return setLink(path, labelPart, sacl, false)
}

var _ acl.LinkLabelStore = FileStore{}

// labelArgs parses "S:(ML;...)" into the ACL SetNamedSecurityInfo
// takes; "S:" (no label) becomes an empty ACL, which removes the label.
// A label has no inheritance flag: protected is ignored.
func labelArgs(path, sacl string, _ bool) (setArgs, error) {
	info := windows.SECURITY_INFORMATION(windows.LABEL_SECURITY_INFORMATION)
	if _, ok := acl.ParseLabel(sacl); !ok {
		empty, err := windows.ACLFromEntries(nil, nil)
		if err != nil {
			return setArgs{}, fmt.Errorf("empty label ACL for %s: %w", path, err)
		}
		return setArgs{info: info, sacl: empty}, nil
	}
	a, err := aclFromSDDL(sacl, (*windows.SECURITY_DESCRIPTOR).SACL)
	if err != nil {
		return setArgs{}, fmt.Errorf("label for %s: %w", path, err)
	}
	return setArgs{info: info, sacl: a}, nil
}

// aclFromSDDL parses sddl and takes one of its ACLs with get (the
// descriptor's DACL or SACL method).
func aclFromSDDL(sddl string, get func(*windows.SECURITY_DESCRIPTOR) (*windows.ACL, bool, error)) (*windows.ACL, error) {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return nil, err
	}
	a, _, err := get(sd)
	return a, err
}

// setArgs are the parts of a Set(Named)SecurityInfo call that say what
// it writes.
type setArgs struct {
	info       windows.SECURITY_INFORMATION
	dacl, sacl *windows.ACL
}

// part is the piece of a file's security descriptor one FileStore call
// reads or writes: the DACL, or the mandatory label in the SACL.
type part struct {
	info windows.SECURITY_INFORMATION
	// tag follows the call's name in errors ("(LABEL)" for the label).
	tag string
	// write is the access a link handle needs to write this part
	// (WRITE_OWNER for a label).
	write uint32
	// args parses the SDDL to write.
	args func(path, sddl string, protected bool) (setArgs, error)
}

var (
	daclPart  = part{info: windows.DACL_SECURITY_INFORMATION, write: windows.WRITE_DAC, args: daclArgs}
	labelPart = part{info: windows.LABEL_SECURITY_INFORMATION, tag: "(LABEL)", write: windows.WRITE_OWNER, args: labelArgs}
)

// getNamed reads pt of path as SDDL; a missing path is fs.ErrNotExist.
func getNamed(path string, pt part) (string, error) {
	op := "GetNamedSecurityInfo" + pt.tag
	sd, err := windows.GetNamedSecurityInfo(acl.LongPath(path), windows.SE_FILE_OBJECT, pt.info)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
			return "", &fs.PathError{Op: op, Path: path, Err: fs.ErrNotExist}
		}
		return "", &fs.PathError{Op: op, Path: path, Err: err}
	}
	return sd.String(), nil
}

// setNamed writes pt of path from sddl (protected: a DACL that does not
// inherit).
func setNamed(path string, pt part, sddl string, protected bool) error {
	a, err := pt.args(path, sddl, protected)
	if err != nil {
		return err
	}
	if err := windows.SetNamedSecurityInfo(acl.LongPath(path), windows.SE_FILE_OBJECT, a.info, nil, nil, a.dacl, a.sacl); err != nil {
		return &fs.PathError{Op: "SetNamedSecurityInfo" + pt.tag, Path: path, Err: err}
	}
	return nil
}

// getLink reads pt of the link object at path as SDDL.
func getLink(path string, pt part) (string, error) {
	h, err := openLink(path, windows.READ_CONTROL)
	if err != nil {
		return "", err
	}
	defer windows.CloseHandle(h)
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, pt.info)
	if err != nil {
		return "", &fs.PathError{Op: "GetSecurityInfo" + pt.tag, Path: path, Err: err}
	}
	return sd.String(), nil
}

// setLink writes pt of the link object at path from sddl through a
// handle opened on the link itself.
func setLink(path string, pt part, sddl string, protected bool) error {
	a, err := pt.args(path, sddl, protected)
	if err != nil {
		return err
	}
	h, err := openLink(path, windows.READ_CONTROL|pt.write)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	if err := windows.SetSecurityInfo(h, windows.SE_FILE_OBJECT, a.info, nil, nil, a.dacl, a.sacl); err != nil {
		return &fs.PathError{Op: "SetSecurityInfo" + pt.tag, Path: path, Err: err}
	}
	return nil
}
