package apparmor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HostSystem reads the real machine.
func HostSystem() System { return System{ReadFile: os.ReadFile, Geteuid: os.Geteuid} }

// Host is the machine Setup and Remove act on: a seam, so that their flow
// is tested without root and without a kernel that has AppArmor.
type Host struct {
	System
	CacheDir string // AppArmor's cache of compiled profiles
	Parser   string // apparmor_parser; "" looks it up
	// Prove checks the loaded profile for the user behind sudo.
	Prove func(ctx context.Context, out io.Writer, exe string) error
	// Confined lists the processes running under the profile; nil
	// reads /proc.
	Confined func() []int
}

// DefaultHost is the real machine.
func DefaultHost() *Host {
	return &Host{System: HostSystem(), CacheDir: "/var/cache/apparmor", Prove: Prove}
}

// Setup is [Host.Setup] on the real machine.
func Setup(ctx context.Context, out io.Writer, exe string) error {
	return DefaultHost().Setup(ctx, out, exe)
}

// Remove is [Host.Remove] on the real machine.
func Remove(ctx context.Context, out io.Writer) error { return DefaultHost().Remove(ctx, out) }

// Setup installs and loads the profile for exe when AppArmor restricts
// user namespaces, then proves it by running a sandboxed `true` as the
// user who invoked sudo. Run again, it repairs what differs and proves
// again. Without AppArmor or without the restriction it says that nothing
// is needed.
func (h *Host) Setup(ctx context.Context, out io.Writer, exe string) error {
	st := Inspect(h.System, exe)
	if !st.Restricted {
		_, detail := st.Check()
		fmt.Fprintf(out, "agentbox: %s; nothing to set up on Linux\n", detail)
		return nil
	}
	if !st.Root {
		return fmt.Errorf("%w: AppArmor restricts user namespaces here; run `sudo %s setup` to install a profile for this binary", ErrNotRoot, exe)
	}
	want, err := Profile(exe)
	if err != nil {
		return err
	}
	cur, err := os.ReadFile(st.File)
	switch {
	case err == nil && ProfileBinary(cur) == "":
		return fmt.Errorf("%s exists and was not written by agentbox; move it aside and run setup again", st.File)
	case err == nil && string(cur) == want:
		fmt.Fprintf(out, "agentbox: %s is up to date\n", st.File)
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if err := writeFile(st.File, []byte(want)); err != nil {
			return err
		}
		fmt.Fprintf(out, "agentbox: wrote %s (userns for %s)\n", st.File, exe)
	default:
		return fmt.Errorf("reading %s: %w", st.File, err)
	}
	parser, err := h.parser()
	if err != nil {
		return err
	}
	// -r loads or replaces; the kernel then attaches the profile to the
	// next exec of exe. Boot loads it from ProfileDir.
	if b, err := exec.CommandContext(ctx, parser, "-r", st.File).CombinedOutput(); err != nil {
		return fmt.Errorf("loading the profile: %s -r %s: %v\n%s", parser, st.File, err, b)
	}
	if now := Inspect(h.System, exe); now.LoadedKnown && !now.Loaded {
		return fmt.Errorf("%s -r %s succeeded, but the kernel lists no profile %q", parser, st.File, ProfileName)
	}
	fmt.Fprintf(out, "agentbox: loaded AppArmor profile %s\n", ProfileName)
	return h.Prove(ctx, out, exe)
}

// Remove unloads and deletes the profile agentbox wrote, and the cache
// AppArmor compiled from it at boot. Without root it only says what is
// left (ErrNotRoot).
func (h *Host) Remove(ctx context.Context, out io.Writer) error {
	st := Inspect(h.System, "")
	cur, err := os.ReadFile(st.File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", st.File, err)
	}
	if ProfileBinary(cur) == "" {
		fmt.Fprintf(out, "agentbox: kept %s: not written by agentbox\n", st.File)
		return nil
	}
	if !st.Root {
		return fmt.Errorf("%w: run `sudo agentbox cleanup` to remove the AppArmor profile %s", ErrNotRoot, st.File)
	}
	// Processes running under the profile are agentbox's, maybe other
	// users': unloading it would leave their next sandboxes (a session's
	// or the resident helper's) without user namespaces.
	confined := h.Confined
	if confined == nil {
		confined = confinedProcs
	}
	if st.Loaded {
		if pids := confined(); len(pids) > 0 {
			fmt.Fprintf(out, "agentbox: kept AppArmor profile %s: %d running agentbox process(es) use it (pid %s); run cleanup again once they end\n", st.File, len(pids), joinPids(pids))
			return nil
		}
		parser, err := h.parser()
		if err != nil {
			return err
		}
		if b, err := exec.CommandContext(ctx, parser, "-R", st.File).CombinedOutput(); err != nil {
			return fmt.Errorf("unloading the profile: %s -R %s: %v\n%s", parser, st.File, err, b)
		}
	}
	if err := os.Remove(st.File); err != nil {
		return fmt.Errorf("removing the profile: %w", err)
	}
	fmt.Fprintf(out, "agentbox: removed AppArmor profile %s\n", st.File)
	// The boot-time load caches the compiled profile under its name, one
	// directory per kernel feature set.
	caches, _ := filepath.Glob(filepath.Join(h.CacheDir, "*", ProfileName))
	for _, c := range caches {
		if fi, err := os.Lstat(c); err == nil && fi.Mode().IsRegular() && os.Remove(c) == nil {
			fmt.Fprintf(out, "agentbox: removed %s\n", c)
		}
	}
	return nil
}

// confinedProcs lists the processes whose AppArmor label is the
// profile's ("agentbox (unconfined)").
func confinedProcs() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/attr/apparmor/current")
		if err != nil {
			b, err = os.ReadFile("/proc/" + e.Name() + "/attr/current")
		}
		label := strings.TrimRight(string(b), "\x00\n")
		if err == nil && (label == ProfileName || strings.HasPrefix(label, ProfileName+" (")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func joinPids(pids []int) string {
	s := make([]string, 0, min(len(pids), 5))
	for _, p := range pids[:min(len(pids), 5)] {
		s = append(s, strconv.Itoa(p))
	}
	if len(pids) > 5 {
		s = append(s, "...")
	}
	return strings.Join(s, ", ")
}

func (h *Host) parser() (string, error) {
	if h.Parser != "" {
		return h.Parser, nil
	}
	return findParser()
}

// Prove runs `exe run -s read-only -- true` as the user behind sudo, with
// a scratch config and state directory so it leaves nothing in their
// home. Degraded mode is off by default, so success means user namespaces
// work for that user.
func Prove(ctx context.Context, out io.Writer, exe string) error {
	uidS, gidS, name := os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID"), os.Getenv("SUDO_USER")
	if uidS == "" || uidS == "0" {
		fmt.Fprintf(out, "agentbox: not run through sudo, so not proven for an unprivileged user: run `%s doctor` as the user who runs agentbox\n", exe)
		return nil
	}
	uid, err1 := strconv.ParseUint(uidS, 10, 32)
	gid, err2 := strconv.ParseUint(gidS, 10, 32)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("proving the profile: SUDO_UID=%q SUDO_GID=%q are not numbers", uidS, gidS)
	}
	home := "/"
	if u, err := user.LookupId(uidS); err == nil {
		home = u.HomeDir
		name = u.Username
	}
	scratch, err := os.MkdirTemp("", "agentbox-setup-")
	if err != nil {
		return fmt.Errorf("proving the profile: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := os.Chown(scratch, int(uid), int(gid)); err != nil {
		return fmt.Errorf("proving the profile: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "run", "-s", "read-only", "-C", "/", "--", "true")
	cmd.Dir = "/"
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home, "USER=" + name, "LOGNAME=" + name,
		"XDG_CONFIG_HOME=" + scratch, "XDG_STATE_HOME=" + scratch,
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the profile is loaded, but a sandboxed `true` as %s still fails (%v): %s", name, err, strings.TrimSpace(string(b)))
	}
	fmt.Fprintf(out, "agentbox: proven: a sandboxed `true` runs as %s\n", name)
	return nil
}

// findParser finds apparmor_parser, which root's PATH may lack (sudo's
// secure_path has it; a bare `su` may not).
func findParser() (string, error) {
	if p, err := exec.LookPath("apparmor_parser"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("apparmor_parser not found: install the apparmor package")
}

// writeFile replaces path atomically, so a boot never meets half a profile.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".agentbox-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
