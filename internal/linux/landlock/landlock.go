// Package landlock confines the sandboxed command's filesystem access
// with Landlock, as a second wall behind the mount namespace and as the
// only one where user namespaces are unavailable.
//
// It wraps github.com/landlock-lsm/go-landlock strictly: [Restrict]
// handles every filesystem right the running kernel can restrict, refuses
// to run below a minimum ABI instead of degrading, and reports in
// [Applied] exactly what it enforced so callers can print it.
//
// # Policy
//
//   - Everything is readable and executable ("/" with read_file,
//     read_dir, execute).
//   - Each writable root allows everything beneath it (write, create,
//     remove, truncate, refer) except device ioctls and connecting to
//     pathname UNIX sockets of processes outside the sandbox.
//   - The character devices a shell writes to are writable,
//     with ioctls: /dev/null, /dev/zero, /dev/full, /dev/random,
//     /dev/urandom, /dev/tty, /dev/ptmx and the ptys under /dev/pts.
//     /dev/shm is not among them: it is a host-wide directory, so a
//     policy that wants POSIX shared memory lists it as a writable root.
//   - Optionally, abstract UNIX sockets and signals are scoped to the
//     sandbox (ABI 6).
//
// # Limitations
//
// Landlock only adds restrictions; it cannot deny a subpath inside a
// writable root, so protected subpaths (.git, ...) rely on read-only bind
// mounts. It does not mediate chmod, chown, utimes, xattrs, stat, or
// operations on file descriptors opened before Restrict. Network access
// is left to the network namespace and seccomp: Landlock's TCP rules do
// not cover other protocols.
package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// DefaultMinABI is the floor used when [Config.MinABI] is zero. Below
// ABI 3 Landlock cannot restrict truncate(2) or O_TRUNC, so a read-only
// sandbox would still let a command empty every file the user owns.
const DefaultMinABI = 3

// ErrUnavailable is wrapped by errors that mean the kernel offers no
// usable Landlock at all.
var ErrUnavailable = errors.New("landlock unavailable")

// Config is what to enforce.
type Config struct {
	// WritableRoots are absolute paths, directories or files, under
	// which writing is allowed. Each must exist; symlinks are followed,
	// so the rule applies to the target. A file root can be written
	// and truncated but not removed or renamed (that is a right on its
	// parent directory).
	WritableRoots []string
	// ScopeAbstractUnix forbids connecting to abstract UNIX sockets
	// created outside the sandbox (containerd-shim style escapes).
	// Needs ABI 6.
	ScopeAbstractUnix bool
	// ScopeSignals forbids signalling processes outside the sandbox.
	// Needs ABI 6.
	ScopeSignals bool
	// MinABI is the lowest Landlock ABI the caller accepts; zero means
	// DefaultMinABI. Restrict fails on a kernel below it.
	MinABI int
	// ThisThread restricts only the calling thread (and what it forks or
	// executes afterwards) instead of every thread of the process. The
	// sandbox's init stage forks the command from one locked thread and
	// keeps its other threads free to signal and serve the command: on
	// kernels before ABI 8 each thread restricted separately gets a
	// sibling domain, and scoping then forbids signalling across them.
	ThisThread bool
	// NoNewPrivsSet says the caller has set no_new_privs on every thread
	// already, so restricting them all takes one call to every thread
	// instead of two. Without no_new_privs (or CAP_SYS_ADMIN) on a
	// thread, the kernel refuses to restrict it, and Restrict fails.
	NoNewPrivsSet bool
	// UnixConnect leaves connecting to pathname unix sockets unhandled
	// (ABI 9): for the init stage's own threads, whose connects on the
	// command's behalf the unix socket supervisor has already decided.
	UnixConnect bool
	// HostDev says the command sees the host's /dev (no mount namespace,
	// degraded mode). Reading everything would then include the user's
	// other terminals under /dev/pts (keystrokes typed there, a sudo
	// password among them; and with write, their settings and screen)
	// and, for root, the consoles and input devices. So files may be
	// opened for reading beneath every entry of / but /dev, and in /dev
	// only the devices in hostDevReadable; listing and executing stay
	// allowed everywhere, and /dev/pts is not writable. New ptys from
	// /dev/ptmx then cannot be opened by their /dev/pts path.
	HostDev bool
	// Hidden, with HostDev, are paths beneath which no file may be
	// opened for reading (the policy's hidden paths, which no mount
	// namespace masks): reading is granted beneath every sibling along
	// the way to each instead of beneath / whole, and writable roots
	// lose the read right, which the same siblings give back. Listing
	// stays allowed everywhere, so a hidden directory shows its names.
	// Reopen are paths beneath hidden ones readable all the same.
	Hidden, Reopen []string
}

// Applied describes what Restrict enforced.
type Applied struct {
	// ABI is the Landlock ABI version used.
	ABI int
	// HandledFS are the filesystem rights restricted everywhere except
	// where a rule grants them.
	HandledFS landlock.AccessFSSet
	// Unhandled are rights go-landlock knows that this kernel cannot
	// restrict; they are not enforced.
	Unhandled landlock.AccessFSSet
	// Scoped are the IPC scopes enforced.
	Scoped landlock.ScopedSet
	// WritableDirs and WritableFiles are the writable roots, split by
	// type; Devices are the device paths that were present and granted.
	WritableDirs, WritableFiles, Devices []string
	// Notes explain adjustments, such as an ABI lowered for a kernel
	// bug.
	Notes []string
}

func (a Applied) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "landlock ABI %d: restricts %v", a.ABI, a.HandledFS)
	if a.Scoped != 0 {
		fmt.Fprintf(&b, ", scopes %v", a.Scoped)
	}
	fmt.Fprintf(&b, "; writable: dirs %q files %q devices %q", a.WritableDirs, a.WritableFiles, a.Devices)
	if a.Unhandled != 0 {
		fmt.Fprintf(&b, "; not enforced by this kernel: %v", a.Unhandled)
	}
	for _, n := range a.Notes {
		b.WriteString("; ")
		b.WriteString(n)
	}
	return b.String()
}

// devices are the character devices (and the /dev/pts directory) that a
// shell and common tools need to write to and ioctl, whatever the policy:
// redirections to /dev/null, dd from /dev/zero, terminal settings on
// /dev/tty, new ptys for script(1) and expect. Paths that do not exist
// (a minimal /dev) are skipped.
var devices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/pts",
}

// WritableDevices are the devices every sandbox may write, whatever its
// roots (those that exist on this machine are granted).
func WritableDevices() []string { return slices.Clone(devices) }

// hostDevReadable are the entries of the host's /dev a HostDev command
// may open for reading: the devices above but the host's ptys, and the
// directories POSIX IPC lives in.
var hostDevReadable = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/shm", "/dev/mqueue", "/dev/hugepages",
}

// lstat is os.Lstat, for readableAround; tests replace it.
var lstat = os.Lstat

// listDir lists the names in a directory, for HostDev's read rules.
var listDir = func(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, err
}

// ABI returns the Landlock ABI version the running kernel offers, as
// Restrict will use it: a kernel reporting ABI 6 or later without the
// fix for signal scoping (erratum 2) counts as 5, as go-landlock does,
// and a kernel newer than go-landlock counts as the newest ABI it knows.
// The error wraps ErrUnavailable with the reason when Landlock is
// missing: not built in (ENOSYS) or not enabled at boot (EOPNOTSUPP).
func ABI() (int, error) {
	v, _, err := abi()
	return v, err
}

// Restrict enforces cfg on the whole calling process (every thread), or on
// the calling thread only when cfg.ThisThread is set, and on everything
// executed from there afterwards. On every thread it also sets
// no_new_privs first, unless cfg.NoNewPrivsSet; the caller of a
// ThisThread restriction sets it on its thread itself. It either
// enforces every right the kernel supports or fails; it never returns
// success with less. Call it once, late in the init stage: after mounts
// and capability dropping, before seccomp (whose filter denies nothing
// Landlock needs, but belongs last) and exec.
func Restrict(cfg Config) (Applied, error) {
	return restrict(cfg)
}

// presets index go-landlock's per-ABI configurations by version. They
// are the library's exported data on what each ABI can restrict, so this
// package does not keep its own copy.
var presets = []landlock.Config{
	{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
	landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// maxKnownABI is the newest ABI go-landlock knows.
var maxKnownABI = len(presets) - 1

// Rights groups, from the kernel's access flags.
const (
	readRights = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	// fileRights are the rights that make sense on a non-directory; the
	// kernel rejects a rule giving directory rights to a file.
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// notInRoots are withheld from writable roots: device ioctls (the
	// devices that need them are listed in devices) and connecting to
	// pathname sockets of outside processes such as docker.sock or an
	// ssh agent that happen to live under a writable root.
	notInRoots = ll.AccessFSIoctlDev | ll.AccessFSResolveUnix
	// deviceRights: read, write (O_TRUNC included) and ioctl.
	deviceRights = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// plan computes the go-landlock configuration and rules for cfg at the
// given ABI. It is pure apart from stat, which tells directories from
// files, so it is tested on any machine.
func plan(cfg Config, abi int, stat func(string) (fs.FileInfo, error)) (landlock.Config, []pathRule, Applied, error) {
	var zero landlock.Config
	minABI := cfg.MinABI
	if minABI == 0 {
		minABI = DefaultMinABI
	}
	if minABI < 0 || minABI > maxKnownABI {
		return zero, nil, Applied{}, fmt.Errorf("landlock: minimum ABI %d outside 1..%d", minABI, maxKnownABI)
	}
	if abi < 1 || abi > maxKnownABI {
		return zero, nil, Applied{}, fmt.Errorf("landlock: %w: ABI %d", ErrUnavailable, abi)
	}
	if abi < minABI {
		return zero, nil, Applied{}, fmt.Errorf("landlock: kernel offers ABI %d, policy needs at least %d (%s)",
			abi, minABI, missingSince(abi, minABI))
	}
	var scoped landlock.ScopedSet
	if cfg.ScopeAbstractUnix {
		scoped |= ll.ScopeAbstractUnixSocket
	}
	if cfg.ScopeSignals {
		scoped |= ll.ScopeSignal
	}
	if missing := scoped &^ presets[abi].Scoped; missing != 0 {
		return zero, nil, Applied{}, fmt.Errorf("landlock: scoping %v needs ABI 6 (Linux 6.12), kernel offers ABI %d", missing, abi)
	}

	handled := presets[abi].HandledAccessFS
	if cfg.UnixConnect {
		handled &^= ll.AccessFSResolveUnix
	}
	a := Applied{
		ABI:       abi,
		HandledFS: handled,
		Unhandled: presets[maxKnownABI].HandledAccessFS &^ handled,
		Scoped:    scoped,
	}
	for _, p := range cfg.WritableRoots {
		if !strings.HasPrefix(p, "/") {
			return zero, nil, Applied{}, fmt.Errorf("landlock: writable root %q is not absolute", p)
		}
		fi, err := stat(p)
		if err != nil {
			return zero, nil, Applied{}, fmt.Errorf("landlock: writable root: %w", err)
		}
		if fi.IsDir() {
			a.WritableDirs = append(a.WritableDirs, p)
		} else {
			a.WritableFiles = append(a.WritableFiles, p)
		}
	}
	for _, p := range devices {
		if cfg.HostDev && p == "/dev/pts" {
			continue // the host's ptys: other terminals of the user
		}
		// A missing device only means the command cannot use it;
		// nothing is granted in its place.
		if _, err := stat(p); err == nil {
			a.Devices = append(a.Devices, p)
		}
	}
	rules := pathRules(handled, a)
	if cfg.HostDev {
		readable, err := hostReadable(stat)
		if err != nil {
			return zero, nil, Applied{}, err
		}
		rules[0] = pathRule{handled & (ll.AccessFSExecute | ll.AccessFSReadDir), []string{"/"}}
		if len(cfg.Hidden) > 0 {
			around, err := readableAround(readable, cfg.Hidden, cfg.Reopen, stat)
			if err != nil {
				return zero, nil, Applied{}, err
			}
			readable = around
			for i := range rules {
				rules[i].access &^= ll.AccessFSReadFile
			}
			a.Notes = append(a.Notes, fmt.Sprintf("%d hidden paths: files may be read beneath %d paths around them", len(cfg.Hidden), len(readable)))
		}
		rules = append(rules, pathRule{handled & ll.AccessFSReadFile, readable})
		a.Notes = append(a.Notes, "host /dev: only "+strings.Join(hostDevReadable, ", ")+" may be opened for reading")
	}
	return landlock.Config{HandledAccessFS: handled, Scoped: scoped}, rules, a, nil
}

// hostReadable lists the paths beneath which a HostDev command may open
// files for reading: every entry of / but /dev, and the entries of
// hostDevReadable that exist.
func hostReadable(stat func(string) (fs.FileInfo, error)) ([]string, error) {
	names, err := listDir("/")
	if err != nil {
		return nil, fmt.Errorf("landlock: listing /: %w", err)
	}
	var out []string
	for _, n := range names {
		p := "/" + n
		if n == "dev" {
			continue
		}
		// A dangling symlink has nothing to grant.
		if _, err := stat(p); err == nil {
			out = append(out, p)
		}
	}
	for _, p := range hostDevReadable {
		if _, err := stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// readableAround replaces each path of readable that holds a hidden path
// by its entries, recursively, leaving out the hidden paths themselves
// (but for what reopen names beneath them): reading beneath the result
// reaches everything readable reached but the hidden paths. A
// directory that cannot be listed is left out whole (fail closed).
func readableAround(readable, hidden, reopen []string, stat func(string) (fs.FileInfo, error)) ([]string, error) {
	within := func(p, root string) bool { return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") }
	holds := func(p string, paths []string) bool {
		for _, h := range paths {
			if within(h, p) {
				return true
			}
		}
		return false
	}
	isHidden := func(p string) bool { return slices.Contains(hidden, p) }
	var out []string
	var walk func(p string, inHidden bool) error
	walk = func(p string, inHidden bool) error {
		// A rule is made on what a path leads to: a symbolic link
		// among the siblings (or the re-opened names: .ssh/x.pub ->
		// id_rsa) would grant its target, which may be hidden. Its
		// target is granted, or not, where it lies.
		if fi, err := lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		switch {
		case inHidden && slices.Contains(reopen, p):
			out = append(out, p)
			return nil
		case inHidden && !holds(p, reopen):
			return nil
		case !inHidden && isHidden(p):
			if !holds(p, reopen) {
				return nil
			}
			inHidden = true
		case !inHidden && !holds(p, hidden):
			if _, err := stat(p); err == nil {
				out = append(out, p)
			}
			return nil
		}
		names, err := listDir(p)
		if err != nil {
			return nil
		}
		if len(out)+len(names) > 100_000 {
			return fmt.Errorf("landlock: more than 100000 read rules around the hidden paths (under %s)", p)
		}
		for _, n := range names {
			if err := walk(strings.TrimSuffix(p, "/")+"/"+n, inHidden); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range readable {
		if err := walk(r, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pathRule grants access beneath each of paths.
type pathRule struct {
	access landlock.AccessFSSet
	paths  []string
}

// pathRules lists the grants: read and execute everywhere, everything
// handled beneath a writable directory, file rights on a writable file,
// and device rights on the devices a shell needs.
func pathRules(handled landlock.AccessFSSet, a Applied) []pathRule {
	rules := []pathRule{{handled & readRights, []string{"/"}}}
	if len(a.WritableDirs) > 0 {
		rules = append(rules, pathRule{handled &^ notInRoots, a.WritableDirs})
	}
	if len(a.WritableFiles) > 0 {
		rules = append(rules, pathRule{handled & fileRights &^ notInRoots, a.WritableFiles})
	}
	if len(a.Devices) > 0 {
		rules = append(rules, pathRule{handled & deviceRights, a.Devices})
	}
	return rules
}

// missingSince names what ABIs above have add, for the floor error.
func missingSince(have, need int) string {
	what := map[int]string{
		1:  "basic filesystem rights, Linux 5.13",
		2:  "refer: renames and links across directories, Linux 5.19",
		3:  "truncate, Linux 6.2",
		4:  "TCP bind/connect, Linux 6.7",
		5:  "device ioctl, Linux 6.10",
		6:  "abstract UNIX socket and signal scoping, Linux 6.12",
		7:  "audit logging, Linux 6.15",
		8:  "thread synchronisation",
		9:  "pathname UNIX socket connect",
		10: "UDP",
		11: "no new rights",
	}
	var s []string
	for v := have + 1; v <= need; v++ {
		s = append(s, fmt.Sprintf("ABI %d adds %s", v, what[v]))
	}
	return strings.Join(s, "; ")
}
