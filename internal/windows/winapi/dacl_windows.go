package winapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// FileStore reads and writes file and directory DACLs as SDDL; it is the
// acl.Store the sandbox applies its plan through.
type FileStore struct{}

// GetDACL returns path's DACL ("D:...").
func (FileStore) GetDACL(path string) (string, error) {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
			return "", &fs.PathError{Op: "GetNamedSecurityInfo", Path: path, Err: fs.ErrNotExist}
		}
		return "", &fs.PathError{Op: "GetNamedSecurityInfo", Path: path, Err: err}
	}
	return sd.String(), nil
}

// SetDACL writes path's DACL. Windows recomputes inherited entries and
// propagates inheritable ones to the whole subtree: this is the slow call
// acl.Apply avoids when nothing is missing.
func (FileStore) SetDACL(path, sddl string, protected bool) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("DACL for %s: %w", path, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("DACL for %s: %w", path, err)
	}
	info := windows.SECURITY_INFORMATION(windows.DACL_SECURITY_INFORMATION)
	if protected {
		info |= windows.PROTECTED_DACL_SECURITY_INFORMATION
	} else {
		info |= windows.UNPROTECTED_DACL_SECURITY_INFORMATION
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, info, nil, nil, dacl, nil); err != nil {
		return &fs.PathError{Op: "SetNamedSecurityInfo", Path: path, Err: err}
	}
	return nil
}

// Mkdir creates a directory (fs.ErrExist when it exists).
func (FileStore) Mkdir(path string) error { return os.Mkdir(path, 0o755) }
