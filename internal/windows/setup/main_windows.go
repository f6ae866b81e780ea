package setup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/winapi"
)

// Main is agentbox-setup's main: one argument, the encoded [Payload]. It
// returns the process exit code.
func Main(args []string, stdout io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: agentbox-setup PAYLOAD (run `agentbox setup` instead)")
		return ExitUsage
	}
	p, err := DecodePayload(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbox-setup:", err)
		return ExitUsage
	}
	out := stdout
	if !windows.GetCurrentProcessToken().IsElevated() {
		fmt.Fprintln(out, "agentbox-setup: not running as administrator")
		return ExitFailed
	}
	ctx := context.Background()
	base := BaseDir()
	if p.LogID != "" {
		f, err := openLog(base, p.LogID, p.RealUserSID)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentbox-setup: log:", err)
			return ExitFailed
		}
		defer f.Close()
		out = f
	}
	switch p.Mode {
	case ModeFull:
		err = runFull(ctx, base, p, out)
	case ModeReadGrant:
		err = readGrantPass(ctx, base, p)
	case ModeCleanup:
		if err = runCleanup(ctx, base, p, out); err != nil {
			fmt.Fprintln(out, "agentbox-setup:", err)
			return ExitPartial
		}
		return ExitOK
	}
	if err != nil {
		fmt.Fprintln(out, "agentbox-setup:", err)
		return ExitFailed
	}
	return ExitOK
}

// runFull is the blocking part of setup, in the order that keeps a failure
// safe: no marker (so no elevated run) until everything else is in place.
func runFull(ctx context.Context, base string, p *Payload, out io.Writer) error {
	if created, err := ensureGroup(Group, "agentbox sandbox users"); err != nil {
		return err
	} else if created {
		fmt.Fprintf(out, "created group %s\n", Group)
	}
	groupSID, err := lookupSID(Group)
	if err != nil {
		return err
	}
	users, err := usersGroupName()
	if err != nil {
		return err
	}
	accounts := map[string]*Account{}
	passwords := map[string]string{}
	for _, name := range []string{OfflineUser, OnlineUser} {
		pw, err := NewPassword()
		if err != nil {
			return err
		}
		created, err := ensureUser(name, pw, "agentbox sandbox user; remove with `agentbox cleanup`")
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(out, "created user %s\n", name)
		} else {
			fmt.Fprintf(out, "user %s exists; password rotated\n", name)
		}
		s, err := lookupSID(name)
		if err != nil {
			return err
		}
		for _, g := range []string{users, Group} {
			if err := addMember(g, s); err != nil {
				return err
			}
		}
		if err := hideUser(name); err != nil {
			return err
		}
		accounts[name] = &Account{User: name, SID: s.String()}
		passwords[name] = pw
	}
	if err := makeStateDirs(base, p.RealUserSID, groupSID.String()); err != nil {
		return fmt.Errorf("state directories: %w", err)
	}
	if err := saveCreds(base, *accounts[OfflineUser], *accounts[OnlineUser], passwords[OfflineUser], passwords[OnlineUser]); err != nil {
		return fmt.Errorf("storing credentials: %w", err)
	}
	fmt.Fprintf(out, "stored credentials (DPAPI) in %s\n", filepath.Join(base, SecretsDir))
	if err := ensureFirewall(ctx, accounts[OfflineUser].SID, p.ProxyPorts, out); err != nil {
		return err
	}
	if err := CheckFirewall(ctx); err != nil {
		// The rules are in place; runs with the network off refuse until
		// the firewall enforces them.
		fmt.Fprintf(out, "WARNING: %v; elevated runs with the network off will refuse to start until this is fixed\n", err)
	}
	runner := filepath.Join(base, BinDir, RunnerName)
	if err := copyFile(p.Runner, runner); err != nil {
		return fmt.Errorf("installing the runner: %w", err)
	}
	m := &Marker{Version: Version, CreatedAt: time.Now().UTC(), OfflineSID: accounts[OfflineUser].SID,
		OnlineSID: accounts[OnlineUser].SID, GroupSID: groupSID.String(), Runner: runner,
		ProxyPorts: normPorts(p.ProxyPorts), RealUserSID: p.RealUserSID}
	if err := writeJSON(filepath.Join(base, MarkerFile), m); err != nil {
		return fmt.Errorf("writing the setup marker: %w", err)
	}
	fmt.Fprintf(out, "setup version %d complete\n", Version)
	// The read grants can take minutes on a big profile; they run on in a
	// detached copy of this process so the UAC-blocking part ends here.
	if err := startReadGrants(p); err != nil {
		fmt.Fprintf(out, "warning: could not start the background read grants: %v\n", err)
	} else {
		fmt.Fprintf(out, "read access grants continue in the background; progress in %s\n", filepath.Join(base, ProgressLog))
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFileAtomic(dst, b)
}

func startReadGrants(p *Payload) error {
	q := *p
	q.Mode, q.LogID = ModeReadGrant, ""
	arg, err := q.Encode()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, arg)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		HideWindow:    true,
		CreationFlags: windows.DETACHED_PROCESS | windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_NO_WINDOW,
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// runCleanup removes everything, reporting each item; it keeps going past
// failures and returns them joined.
func runCleanup(ctx context.Context, base string, p *Payload, out io.Writer) error {
	var errs []error
	note := func(what string, err error) {
		if err != nil {
			fmt.Fprintf(out, "could not remove %s: %v\n", what, err)
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		fmt.Fprintf(out, "removed %s\n", what)
	}
	// The SIDs to revoke: from the marker, else from the accounts that
	// still exist (a setup that failed before writing the marker).
	var sids []string
	if m, _ := readMarker(base); m != nil {
		sids = append(sids, m.OfflineSID, m.OnlineSID, m.GroupSID)
	}
	for _, n := range []string{OfflineUser, OnlineUser, Group} {
		if s, err := lookupSID(n); err == nil && !containsFold(sids, s.String()) {
			sids = append(sids, s.String())
		}
	}
	if len(sids) > 0 {
		g, err := readGrants(base)
		if err != nil {
			g = &Grants{}
			errs = append(errs, err)
		}
		paths := append(g.Paths, p.RevokePaths...)
		changed, err := acl.Revoke(winapi.FileStore{}, paths, sids...)
		if len(changed) > 0 || err != nil {
			note(fmt.Sprintf("sandbox ACEs from %d path(s)", len(changed)), err)
		}
	}
	if names, err := removeFirewall(ctx); len(names) > 0 || err != nil {
		note("firewall rules "+strings.Join(names, ", "), err)
	}
	for _, n := range []string{OfflineUser, OnlineUser} {
		if s, err := lookupSID(n); err == nil {
			// The profile LOGON_WITH_PROFILE created (C:\Users\<name>).
			err := deleteProfile(windows.StringToUTF16Ptr(s.String()), nil, nil)
			if !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
				note("profile of "+n, err)
			}
		}
		if existed, err := deleteUser(n); existed || err != nil {
			note("user "+n, err)
		}
		if existed, err := unhideUser(n); existed || err != nil {
			note("logon-screen entry of "+n, err)
		}
	}
	if existed, err := deleteGroup(Group); existed || err != nil {
		note("group "+Group, err)
	}
	if _, err := os.Stat(base); err == nil {
		note(base, removeBase(base, p))
	}
	if len(errs) == 0 {
		fmt.Fprintln(out, "agentbox left nothing else on this machine")
	}
	return errors.Join(errs...)
}

// Run is `agentbox setup`: it starts agentbox-setup elevated (UAC prompt
// unless already elevated), waits, and copies its report to out.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	p, err := basePayload(ModeFull)
	if err != nil {
		return err
	}
	p.ProxyPorts, p.ExtraReadRoots = opts.ProxyPorts, opts.ExtraReadRoots
	if p.Runner, err = besideSelf(opts.RunnerExe, RunnerName); err != nil {
		return err
	}
	exe, err := besideSelf(opts.SetupExe, SetupName)
	if err != nil {
		return err
	}
	return elevate(ctx, exe, p, out)
}

// Cleanup is `agentbox cleanup` for elevated mode. When nothing of
// elevated mode is on the machine it says so without a UAC prompt.
func Cleanup(ctx context.Context, out io.Writer) error {
	_, statErr := os.Stat(BaseDir())
	present := statErr == nil
	for _, n := range []string{OfflineUser, OnlineUser, Group} {
		if _, err := lookupSID(n); err == nil {
			present = true
		}
	}
	if !present {
		fmt.Fprintln(out, "elevated sandbox: nothing to remove")
		return nil
	}
	p, err := basePayload(ModeCleanup)
	if err != nil {
		return err
	}
	if d, err := agentdirs.RequireState(os.Getenv, runtime.GOOS); err == nil {
		if st, err := sid.Load(d); err == nil && st != nil {
			p.RevokePaths = st.Paths
		}
	}
	exe, err := besideSelf("", SetupName)
	if err != nil {
		return err
	}
	return elevate(ctx, exe, p, out)
}

// GetStatus reads the marker and grants for doctor. It never fails: a
// problem is reported in Status.Err.
func GetStatus() *Status {
	base := BaseDir()
	st := &Status{Base: base}
	m, err := readMarker(base)
	st.Marker = m
	if err != nil {
		st.Err = fmt.Errorf("%w (%v)", ErrOutdated, err)
		return st
	}
	if m != nil {
		st.Err = CheckMarker(m, m.ProxyPorts)
	} else {
		st.Err = ErrMissing
	}
	if g, err := readGrants(base); err == nil {
		st.GrantsDone, st.Granted = g.Done, len(g.Paths)
	}
	return st
}

// LoadLogin checks the setup marker against what the policy needs and
// returns the credentials of the sandbox user for the network setting:
// Offline (firewalled) unless network is true. Errors wrap ErrMissing or
// ErrOutdated when setup must be (re)run.
func LoadLogin(network bool, proxyPorts []int) (*Login, error) {
	base := BaseDir()
	m, err := readMarker(base)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrOutdated, err)
	}
	if err := CheckMarker(m, proxyPorts); err != nil {
		return nil, err
	}
	a, pw, err := loadCreds(base, network)
	if err != nil {
		return nil, err
	}
	return &Login{User: a.User, SID: a.SID, Password: pw, GroupSID: m.GroupSID, Runner: m.Runner}, nil
}

func basePayload(mode string) (*Payload, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("reading the current user: %w", err)
	}
	profile := os.Getenv("USERPROFILE")
	if profile == "" && mode != ModeCleanup {
		return nil, errors.New("USERPROFILE is not set")
	}
	return &Payload{Version: PayloadVersion, Mode: mode, RealUserSID: u.User.Sid.String(), Profile: profile}, nil
}

func besideSelf(override, name string) (string, error) {
	if override != "" {
		return override, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found next to %s: %w", name, self, err)
	}
	return p, nil
}

// SHELLEXECUTEINFOW (shellapi.h); natural alignment matches on amd64 and
// arm64.
type shellExecuteInfo struct {
	cbSize       uint32
	fMask        uint32
	hwnd         windows.HWND
	lpVerb       *uint16
	lpFile       *uint16
	lpParameters *uint16
	lpDirectory  *uint16
	nShow        int32
	hInstApp     windows.Handle
	lpIDList     uintptr
	lpClass      *uint16
	hkeyClass    windows.Handle
	dwHotKey     uint32
	hIcon        windows.Handle
	hProcess     windows.Handle
}

const (
	_SEE_MASK_NOCLOSEPROCESS = 0x40
	_SEE_MASK_NOASYNC        = 0x100
	_SEE_MASK_FLAG_NO_UI     = 0x400
)

// elevate runs exe with the payload as administrator and waits for it. An
// already elevated caller runs it directly; otherwise ShellExecuteEx's
// "runas" verb shows the UAC prompt, and a declined prompt is ErrCancelled.
func elevate(ctx context.Context, exe string, p *Payload, out io.Writer) error {
	if windows.GetCurrentProcessToken().IsElevated() {
		arg, err := p.Encode()
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, exe, arg)
		cmd.Stdout, cmd.Stderr = out, out
		return exitErr(cmd.Run())
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	p.LogID = hex.EncodeToString(rnd[:])
	logPath := LogPath(BaseDir(), p.LogID)
	// The log grants us read and delete; after a cleanup, also delete on
	// the (then empty) logs and base directories.
	defer func() {
		if os.Remove(logPath) == nil && p.Mode == ModeCleanup {
			os.Remove(filepath.Dir(logPath))
			os.Remove(BaseDir())
		}
	}()
	arg, err := p.Encode()
	if err != nil {
		return err
	}
	info := shellExecuteInfo{
		fMask:        _SEE_MASK_NOCLOSEPROCESS | _SEE_MASK_NOASYNC | _SEE_MASK_FLAG_NO_UI,
		lpVerb:       windows.StringToUTF16Ptr("runas"),
		lpFile:       windows.StringToUTF16Ptr(exe),
		lpParameters: windows.StringToUTF16Ptr(arg),
		nShow:        windows.SW_HIDE,
	}
	info.cbSize = uint32(unsafe.Sizeof(info))
	if err := shellExecuteEx(&info); err != nil {
		if errors.Is(err, windows.ERROR_CANCELLED) {
			return ErrCancelled
		}
		return fmt.Errorf("starting %s as administrator: %w", exe, err)
	}
	defer windows.CloseHandle(info.hProcess)
	// Wait, waking up for cancellation; the elevated process is not ours to
	// kill (we lack the rights), so cancellation only stops waiting.
	for {
		ev, err := windows.WaitForSingleObject(info.hProcess, 200)
		if err != nil {
			return os.NewSyscallError("WaitForSingleObject", err)
		}
		if ev == windows.WAIT_OBJECT_0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting for agentbox-setup: %w", ctx.Err())
		}
	}
	var code uint32
	if err := windows.GetExitCodeProcess(info.hProcess, &code); err != nil {
		return os.NewSyscallError("GetExitCodeProcess", err)
	}
	if b, err := os.ReadFile(logPath); err == nil {
		out.Write(b)
	}
	switch code {
	case ExitOK:
		return nil
	case ExitPartial:
		return errors.New("agentbox-setup could not remove everything (see above)")
	default:
		return fmt.Errorf("agentbox-setup failed with exit status %d (see above)", code)
	}
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() == ExitPartial {
			return errors.New("agentbox-setup could not remove everything (see above)")
		}
		return fmt.Errorf("agentbox-setup failed with exit status %d (see above)", ee.ExitCode())
	}
	return err
}
