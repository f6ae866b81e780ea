package darwin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitDelay bounds how long Wait keeps reading the command's output after
// it has exited or been killed: a process that left the group may still hold
// the pipes, and must not hang the run.
const waitDelay = 5 * time.Second

func command(ctx context.Context, in Input, argv []string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("seatbelt: no command")
	}
	if _, err := os.Stat(SandboxExec); err != nil {
		return nil, fmt.Errorf("seatbelt: %w", err)
	}
	cin, err := canonicalInput(in)
	if err != nil {
		return nil, fmt.Errorf("seatbelt: %w", err)
	}
	profile, params, err := Profile(cin)
	if err != nil {
		return nil, fmt.Errorf("seatbelt profile: %w", err)
	}
	cmd := exec.CommandContext(ctx, SandboxExec, SandboxExecArgs(profile, params, argv)...)
	// Setsid rather than Setpgid: a new session also drops the controlling
	// terminal, so the command cannot push keystrokes into the user's
	// shell with TIOCSTI; it still gets a process group of its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
	return cmd, nil
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return errors.New("seatbelt: command not started")
	}
	// With Setsid the leader's pid is the group id.
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		// os/exec treats this as "already gone", not as a failure.
		return os.ErrProcessDone
	}
	if err != nil {
		return &os.SyscallError{Syscall: "kill", Err: err}
	}
	return nil
}

// canonicalInput returns in with every path spelled as Seatbelt sees it.
func canonicalInput(in Input) (Input, error) {
	out := in
	var err error
	// A root given as a symbolic link means its target (as a bind mount
	// would on Linux); a protected symbolic link is protected itself, and
	// the policy lists its target separately.
	if out.WritableRoots, err = canonicalPaths(in.WritableRoots, true); err != nil {
		return Input{}, err
	}
	if out.Protected, err = canonicalPaths(in.Protected, false); err != nil {
		return Input{}, err
	}
	// Hidden and re-opened paths are taken as they are: a re-opened
	// symbolic link is the link, not its target.
	out.HideRules = make([]HideRule, len(in.HideRules))
	for i, r := range in.HideRules {
		r.Keep = append([]string(nil), r.Keep...)
		if r.Base, err = canonicalPath(r.Base, false); err != nil {
			return Input{}, err
		}
		out.HideRules[i] = r
	}
	for _, l := range []*[]string{&out.GitWritable, &out.GitReadOnly, &out.CacheDirs, &out.TempDirs, &out.Hidden, &out.Reopen} {
		if *l, err = canonicalPaths(*l, false); err != nil {
			return Input{}, err
		}
	}
	return out, nil
}

func canonicalPaths(ps []string, follow bool) ([]string, error) {
	out := make([]string, len(ps))
	for i, p := range ps {
		c, err := canonicalPath(p, follow)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// canonicalPath returns p as the kernel names it: the longest existing
// prefix as reported by F_GETPATH (symbolic links in directories resolved,
// firmlinks kept, each name as stored on disk), followed by the components
// that do not exist yet. A symbolic link at the end of p is followed only
// if follow is set; links in the existing prefix before it are always
// followed.
func canonicalPath(p string, follow bool) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	p = path.Clean(p)
	missing := ""
	for cur := p; ; cur = path.Dir(cur) {
		// Only p's own last element may be a link to keep; once a
		// component is missing, what exists above it is a directory.
		got, err := getpath(cur, follow || cur != p)
		if err == nil {
			return path.Join(got, missing), nil
		}
		if !errors.Is(err, unix.ENOENT) || cur == "/" {
			return "", &os.PathError{Op: "canonicalise", Path: p, Err: err}
		}
		missing = path.Join(path.Base(cur), missing)
	}
}

// getpath opens p without needing read permission (O_EVTONLY), following a
// final symbolic link only if follow is set, and asks the kernel for the
// path of what it opened.
func getpath(p string, follow bool) (string, error) {
	flags := unix.O_EVTONLY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_SYMLINK
	}
	var fd int
	var err error
	for {
		fd, err = unix.Open(p, flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	// fcntl(F_GETPATH) fills a MAXPATHLEN buffer. x/sys only exposes
	// fcntl with a pointer argument through typed wrappers, and
	// FcntlFstore hands its pointer to fcntl(2) unchanged, so the buffer
	// goes through it. It is declared with an int64 so it is at least as
	// aligned as the Fstore_t the wrapper's type claims, and larger.
	buf := new(struct {
		_ [0]int64
		b [unix.PathMax]byte
	})
	if err := unix.FcntlFstore(uintptr(fd), unix.F_GETPATH, (*unix.Fstore_t)(unsafe.Pointer(buf))); err != nil {
		return "", &os.SyscallError{Syscall: "fcntl(F_GETPATH)", Err: err}
	}
	n := 0
	for n < len(buf.b) && buf.b[n] != 0 {
		n++
	}
	return string(buf.b[:n]), nil
}

func check(ctx context.Context, in Input) error {
	cmd, err := command(ctx, in, []string{"/usr/bin/true"})
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	killGroup(cmd)
	if err != nil {
		return fmt.Errorf("seatbelt: %s rejected the profile: %w: %s", SandboxExec, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
