package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/windows"
)

// BaseDir is %ProgramData%\agentbox, where everything setup writes lives.
func BaseDir() string {
	pd := os.Getenv("ProgramData")
	if pd == "" {
		pd = `C:\ProgramData`
	}
	return filepath.Join(pd, "agentbox")
}

// Security descriptors of the state directories. Owner is Administrators
// and the DACLs are protected, so a pre-created (squatted) directory under
// ProgramData, where any user may create folders, loses its attacker's
// ACEs. Deny ACEs come first, in canonical order.
func baseSDDL() string {
	// SYSTEM and Administrators full; Users read and execute (the sandbox
	// users are in Users, so they can run bin\agentbox-runner.exe and read
	// the marker, but replace nothing).
	return "O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;0x1200a9;;;BU)"
}

func secretsSDDL(realUserSID, groupSID string) string {
	// Not inheriting from base: Users get nothing, the sandbox group is
	// denied outright, the real user may read (agentbox decrypts the
	// password it needs to start the runner).
	return "O:BAD:PAI(D;OICI;FA;;;" + groupSID + ")(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FR;;;" + realUserSID + ")"
}

// setSD applies owner and DACL of sddl to path.
func setSD(path, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("security descriptor %q: %w", sddl, err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	err = windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION,
		owner, nil, dacl, nil)
	runtime.KeepAlive(sd)
	if err != nil {
		return &fs.PathError{Op: "SetNamedSecurityInfo", Path: path, Err: err}
	}
	return nil
}

// makeStateDirs creates base and its subdirectories with their DACLs.
func makeStateDirs(base, realUserSID, groupSID string) error {
	for _, d := range []string{base, filepath.Join(base, StateDir), filepath.Join(base, BinDir), filepath.Join(base, SecretsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := setSD(base, baseSDDL()); err != nil {
		return err
	}
	// state and bin inherit base's DACL; re-applying it resets anything a
	// previous version or a user left on them.
	for _, d := range []string{StateDir, BinDir} {
		if err := setSD(filepath.Join(base, d), "O:BAD:AI"); err != nil {
			return err
		}
	}
	return setSD(filepath.Join(base, SecretsDir), secretsSDDL(realUserSID, groupSID))
}

// writeFileAtomic writes data to a temporary file in path's directory
// (which gives it that directory's inherited DACL) and renames it over
// path, so readers never see a half-written file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// readMarker returns the marker, or nil when there is none.
func readMarker(base string) (*Marker, error) {
	b, err := os.ReadFile(filepath.Join(base, MarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseMarker(b)
}

func readGrants(base string) (*Grants, error) {
	b, err := os.ReadFile(filepath.Join(base, GrantsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &Grants{Version: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseGrants(b)
}

func writeJSON(path string, v interface{ Marshal() ([]byte, error) }) error {
	b, err := v.Marshal()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// saveCreds encrypts the two passwords and writes the credentials file.
func saveCreds(base string, off, on Account, offPW, onPW string) error {
	var err error
	if off.Password, err = protect([]byte(offPW)); err != nil {
		return err
	}
	if on.Password, err = protect([]byte(onPW)); err != nil {
		return err
	}
	return writeJSON(filepath.Join(base, CredsFile), &Creds{Version: CredsVersion, Offline: off, Online: on})
}

// loadCreds reads the credentials file and decrypts the password of the
// account for the network setting.
func loadCreds(base string, network bool) (Account, string, error) {
	b, err := os.ReadFile(filepath.Join(base, CredsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Account{}, "", ErrMissing
	}
	if err != nil {
		return Account{}, "", fmt.Errorf("reading sandbox credentials: %w", err)
	}
	c, err := ParseCreds(b)
	if err != nil {
		return Account{}, "", err
	}
	a := c.Account(network)
	pw, err := unprotect(a.Password)
	if err != nil {
		return Account{}, "", fmt.Errorf("decrypting the password of %s: %w", a.User, err)
	}
	return a, string(pw), nil
}
