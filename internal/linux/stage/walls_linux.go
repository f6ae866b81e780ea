package stage

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/linux/unixsock"

	"golang.org/x/sys/unix"
)

// waitFunc is how RunInit waits for the command: unix.Wait4, or with unix
// socket mediation the supervisor's, which does the part of its work that
// must run on this thread (the one the command is forked from) while it
// waits.
type waitFunc func(pid int, ws *unix.WaitStatus, options int, ru *unix.Rusage) (int, error)

// landlockWalls adds Landlock on top of the mount namespace: a second
// filesystem wall that holds even if a mount were undone, and the only one
// in degraded mode. It needs no_new_privs on every thread (setNoNewPrivs).
func landlockWalls(sp *spec.Spec) error {
	roots := append([]string{}, sp.Walls.WritableRoots...)
	if !sp.Degraded.On {
		// /dev/shm is the sandbox's own tmpfs; POSIX semaphores and
		// shared memory (Python multiprocessing, Chromium) need it.
		// Degraded runs see the host's, which stays out of reach.
		roots = append(roots, "/dev/shm")
	}
	// First every thread of the init, the same filesystem rules without
	// scoping: its other threads (the signal forwarder, the supervisor's
	// connects) then write nowhere the command cannot.
	// Without a mount namespace nothing masks the hidden paths: Landlock
	// keeps reads out of them instead.
	var hidden, reopen []string
	if sp.Degraded.On {
		for _, h := range sp.FS.Hides {
			hidden = append(hidden, h.Path)
			reopen = append(reopen, h.Reopen...)
		}
	}
	if _, err := landlock.Restrict(landlock.Config{WritableRoots: roots, UnixConnect: true, HostDev: sp.Degraded.On, NoNewPrivsSet: true, Hidden: hidden, Reopen: reopen}); err != nil {
		return fmt.Errorf("landlock on the init's threads: %w", err)
	}
	// Then the command's thread adds its own, scoped domain; the command
	// inherits both. Scoping needs ABI 6. Below it, the pid and network
	// namespaces already keep signals and abstract sockets in; degraded
	// runs name the gap (DegradedGaps).
	abi, _ := landlock.ABI()
	scoped := abi >= 6
	if _, err := landlock.Restrict(landlock.Config{
		// Only the thread the command is forked from: the init's other
		// threads forward signals to the command, which signal scoping
		// forbids across sibling domains.
		ThisThread:    true,
		WritableRoots: roots,
		// Without a private /dev, the host's terminals are there.
		HostDev: sp.Degraded.On,
		Hidden:  hidden, Reopen: reopen,
		// Without a network namespace, abstract unix sockets of the host
		// would be reachable: scope them, --network or not (opening the
		// network does not open the host's daemons).
		ScopeAbstractUnix: scoped,
		ScopeSignals:      scoped,
	}); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// installSeccomp takes away the kernel interfaces a sandbox escape needs,
// on every thread (TSYNC): mount and friends, new user namespaces, ptrace,
// io_uring, the socket families no namespace isolates. A session's
// commands get the same filter (seccompOptions), plus the fork into a
// new pid namespace their zygote makes.
func installSeccomp(sp *spec.Spec) error {
	opts := seccompOptions(sp)
	opts.AllowNewPID = false
	prog, err := seccomp.BuildNativeProgram(opts)
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := seccomp.Install(prog); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// superviseConnects starts the unix socket supervisor (package unixsock)
// when the spec asks for it: a second, thread-only filter that routes the
// command's connect(2) (and, where needed, chmod and friends) to the init
// for a decision. It must come after installSeccomp, whose TSYNC would
// otherwise copy this thread-only filter onto the supervisor's threads.
// It returns nil when the spec asks for none.
//
// With the network off it records in unreach the destinations the
// command could not reach; connected, when set, sees every connect too.
func superviseConnects(sp *spec.Spec, unreach *unreachables, files *filesSeen, connected func(int, netip.AddrPort, unix.Errno)) (*unixsock.Supervisor, error) {
	if !sp.Walls.MediateUnixConnect {
		files.unavailable = "no connect supervisor to observe them"
		return nil, nil
	}
	allow, opts := unixMediation(sp)
	switch records := recordsUnreachable(sp); {
	case connected != nil:
		opts.Connected = func(sock int, dst netip.AddrPort, errno unix.Errno) {
			connected(sock, dst, errno)
			if records {
				unreach.record(sock, dst, errno)
			}
		}
	case records:
		opts.Connected = unreach.record
	}
	if g := transparentGate(sp, unreach); g != nil {
		opts.AllowInet = g
	}
	sup, err := startSupervisor(allow, opts, sp, files)
	if err != nil {
		return nil, fmt.Errorf("unix socket mediation: %w", err)
	}
	return sup, nil
}

// Budgets for the file refusals a message carries, in bytes of their
// encoding (fsreport.Fit): a lone run's exit is one status frame of at
// most spec.MaxMessage; a session's answer is one packet of at most
// spec.MaxPacket, the host's read buffer. Both leave room for the rest
// of the message (TestMaximalReportsFit).
const (
	maxFilesMessage = 1 << 20
	maxFilesAnswer  = 32 << 10
)

// filesSeen is what a command's file observer recorded, or why there
// was none.
type filesSeen struct {
	rec         *fsreport.Recorder
	unavailable string
}

// denied is the refusals for the init's last message, fitted to budget
// bytes.
func (f *filesSeen) denied(budget int) []fsreport.Denied {
	if f.rec == nil {
		return nil
	}
	return fsreport.Fit(f.rec.List(), budget)
}

// hiddenRead records the reads of hidden paths w counted since before,
// with a recorder of their own when the write observer has none (an
// older kernel, a filter that would not install).
func (f *filesSeen) hiddenRead(w *hiddenReads, before map[int32]int, rules *fsreport.Rules) {
	if w == nil || rules == nil {
		return
	}
	if f.rec == nil {
		f.rec = fsreport.NewRecorder(rules)
	}
	w.record(f.rec, before)
}

// startSupervisor starts the connect supervisor with file observation
// when the spec asks for it (Spec.Walls.Files). The observer only reports: a
// filter that cannot take its rules is installed without them, and files
// says why nothing was observed.
func startSupervisor(allow func(string, *unix.Stat_t) bool, opts unixsock.Options, sp *spec.Spec, files *filesSeen) (*unixsock.Supervisor, error) {
	if sp.Walls.Files == nil {
		files.unavailable = "switched off (AGENTBOX_FSREPORT=0)"
		return unixsock.Start(allow, opts)
	}
	if !kernelAtLeast(5, 5) {
		// Observing answers with SECCOMP_USER_NOTIF_FLAG_CONTINUE
		// (Linux 5.5); without it an observed call could not go on.
		files.unavailable = "the file observer needs Linux 5.5 or later"
		return unixsock.Start(allow, opts)
	}
	files.rec = fsreport.NewRecorder(sp.Walls.Files)
	opts.Files = files.rec.Record
	sup, err := unixsock.Start(allow, opts)
	if err == nil {
		return sup, nil
	}
	files.rec, files.unavailable = nil, fmt.Sprintf("the file observer could not be installed: %v", err)
	opts.Files = nil
	return unixsock.Start(allow, opts)
}

// stickyRoots are the writable roots whose directory is sticky: shared
// directories such as /tmp, whose mode is the system's, not the command's.
func stickyRoots(roots []string) map[string]bool {
	sticky := map[string]bool{}
	for _, r := range roots {
		var st unix.Stat_t
		if unix.Stat(r, &st) == nil && st.Mode&unix.S_ISVTX != 0 {
			sticky[filepath.Clean(r)] = true
		}
	}
	return sticky
}

// privateMounts are the private temporary directories spec mounts, and
// every path mounted in the writable-roots phase (a workspace, a kept
// host directory or a listed socket inside a private /tmp is the host's
// again).
func privateMounts(sp *spec.Spec) (private, mounted []string) {
	for _, m := range sp.FS.Mounts {
		switch m.Kind {
		case spec.BindPrivate:
			private = append(private, m.Path)
		case spec.BindWritable, spec.BindHost:
		default:
			continue
		}
		mounted = append(mounted, m.Path)
	}
	return private, mounted
}

// unixMediation is the rule of the connect supervisor (package unixsock)
// for spec: which pathname sockets a command may reach, and what happens
// to abstract names. A lone run's init and a session's zygote (for each
// command) use the same.
func unixMediation(sp *spec.Spec) (func(string, *unix.Stat_t) bool, unixsock.Options) {
	roots := sp.Walls.WritableRoots
	listed := sp.Walls.AllowUnixSockets
	ownNetns := !sp.Degraded.On && !sp.Net.Network
	ownPidns := !sp.Degraded.On
	opts := unixsock.Options{AllowInet: proxyOnly(sp.Degraded.ProxyAddrs)}
	switch {
	case ownNetns:
		// Abstract names are the sandbox's own.
	case ownPidns:
		// --network: the abstract names are the host's, and the
		// supervisor's connect escapes the Landlock scoping that
		// would refuse them (ScopeAbstractUnix above). Only a
		// listener a process of this sandbox holds is the
		// command's own.
		opts.Abstract = func(sunPath []byte) bool {
			ok, err := unixsock.AbstractListenerHeldHere(sunPath)
			return err == nil && ok
		}
	default:
		// Degraded: nothing tells the command's names from the
		// host's; refuse them all, as Landlock would.
		opts.RefuseAbstract = true
		// No read-only mounts either: Landlock alone keeps writes in
		// the writable roots, and it has no right for metadata. chmod,
		// chown, utimes and xattrs are made by the supervisor, on files
		// inside the writable roots only, and never on a sticky root
		// itself: a shared directory such as /tmp, whose mode (its
		// sticky bit above all) is the system's, not the command's.
		sticky := stickyRoots(roots)
		opts.Metadata = func(p string) bool {
			if sticky[p] {
				return false
			}
			for _, r := range roots {
				if fspath.Within(p, r) {
					return true
				}
			}
			return false
		}
	}
	if private, mounted := privateMounts(sp); len(private) > 0 {
		opts.Stale = func(p string) bool {
			return slices.Contains(private, fspath.InnermostRoot(p, mounted))
		}
	}
	if opts.Metadata == nil && sp.Walls.GuardStickyRoots {
		// The read-only mounts keep metadata outside the writable roots
		// (EROFS); only a sticky root's own directory needs refusing.
		if sticky := stickyRoots(roots); len(sticky) > 0 {
			opts.Metadata = func(p string) bool { return !sticky[p] }
		}
	}
	return func(p string, st *unix.Stat_t) bool {
		// A daemon the user deliberately handed over by name.
		if slices.Contains(listed, p) {
			return true
		}
		inside := false
		for _, r := range roots {
			if fspath.Within(p, r) {
				inside = true
			}
		}
		if !inside || !ownPidns {
			return inside
		}
		// Inside a writable root is not enough: /tmp holds host
		// daemons' sockets (X11, tmux, ssh agents). Only a socket
		// the command itself created may be reached: bound in the
		// sandbox's own network namespace, or with --network (the
		// host's), listening and held by a process of the sandbox.
		var ok bool
		var err error
		if ownNetns {
			ok, err = unixsock.BoundInThisNetns(st)
		} else {
			ok, err = unixsock.PathListenerHeldHere(st)
		}
		return err == nil && ok
	}, opts
}

// kernelAtLeast reports whether the running kernel's release is at least
// major.minor; false when it cannot be read.
func kernelAtLeast(major, minor int) bool {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(uts.Release[:]), major, minor)
}

// releaseAtLeast compares a kernel release string ("6.18.44-fc-v1098")
// with major.minor.
func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
