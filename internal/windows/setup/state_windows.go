package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

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

// ensureDir makes path a real directory (not a link or junction, which an
// administrator must never write through) with the security descriptor
// sddl.
func ensureDir(path, sddl string) error {
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	attrs, err := windows.GetFileAttributes(p)
	if err != nil {
		return &fs.PathError{Op: "GetFileAttributes", Path: path, Err: err}
	}
	if attrs&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 || attrs&windows.FILE_ATTRIBUTE_DIRECTORY == 0 {
		return fmt.Errorf("%s is a link or not a directory; refusing to write there (remove it and run again)", path)
	}
	return setSD(path, sddl)
}

// openLog creates the report file of this run, LogPath(base, id), in the
// administrator-owned base directory: base and base\logs are made real
// directories owned by Administrators first, and the file is created
// new (CREATE_NEW, FILE_FLAG_OPEN_REPARSE_POINT), so nothing planted at
// its name is opened or followed. The real user may read and delete it.
func openLog(base, id, realUserSID string) (*os.File, error) {
	if !ValidLogID(id) {
		return nil, fmt.Errorf("bad log id %q", id)
	}
	if err := ensureDir(base, baseSDDL()); err != nil {
		return nil, err
	}
	if err := ensureDir(filepath.Join(base, LogsDir), "O:BAD:AI"); err != nil {
		return nil, err
	}
	path := LogPath(base, id)
	sd, err := windows.SecurityDescriptorFromString(logSDDL(realUserSID))
	if err != nil {
		return nil, err
	}
	sa := windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(p, windows.GENERIC_WRITE, windows.FILE_SHARE_READ|windows.FILE_SHARE_DELETE, &sa,
		windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	runtime.KeepAlive(sd)
	if err != nil {
		return nil, &fs.PathError{Op: "CreateFile(CREATE_NEW)", Path: path, Err: err}
	}
	return os.NewFile(uintptr(h), path), nil
}

// removeBase removes the base directory for cleanup. When this run writes
// a log (p.LogID), that log and the logs and base directories stay, with
// DELETE granted to the real user, who removes them after reading it.
func removeBase(base string, p *Payload) error {
	if p.LogID == "" {
		return os.RemoveAll(base)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if strings.EqualFold(e.Name(), LogsDir) {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(base, e.Name())))
	}
	logs := filepath.Join(base, LogsDir)
	keep := filepath.Base(LogPath(base, p.LogID))
	if old, err := os.ReadDir(logs); err == nil {
		for _, e := range old {
			if !strings.EqualFold(e.Name(), keep) {
				errs = append(errs, os.Remove(filepath.Join(logs, e.Name())))
			}
		}
	}
	// The real user may delete what is left once it is empty.
	del := "(A;;SD;;;" + p.RealUserSID + ")"
	errs = append(errs, setSD(logs, "O:BAD:AI"+del), setSD(base, strings.Replace(baseSDDL(), "D:PAI", "D:PAI"+del, 1)))
	return errors.Join(errs...)
}
