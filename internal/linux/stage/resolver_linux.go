package stage

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// The stage's side of the name server: its sockets and /etc files made
// inside the sandbox, the port owners table as a command's supervisor
// fills it, and the record of what the command could not reach
// (agentbox's side is in resolver_linux.go).

// listenResolver binds a UDP socket and a listening TCP socket to
// 127.0.0.1:53 (not SO_REUSEADDR: nobody else may bind the port).
func listenResolver() (udp, tcp int, err error) {
	sa := &unix.SockaddrInet4{Addr: spec.ResolverAddr.Addr().As4(), Port: int(spec.ResolverAddr.Port())}
	udp, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, &os.SyscallError{Syscall: "socket", Err: err}
	}
	if err := unix.Bind(udp, sa); err != nil {
		unix.Close(udp)
		return -1, -1, &os.SyscallError{Syscall: "bind(udp 127.0.0.1:53)", Err: err}
	}
	tcp, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(udp)
		return -1, -1, &os.SyscallError{Syscall: "socket", Err: err}
	}
	if err = unix.Bind(tcp, sa); err == nil {
		err = unix.Listen(tcp, 64)
	}
	if err != nil {
		unix.Close(udp)
		unix.Close(tcp)
		return -1, -1, &os.SyscallError{Syscall: "bind(tcp 127.0.0.1:53)", Err: err}
	}
	return udp, tcp, nil
}

// bindEtc binds the spec's own files over the host's, read-only, at the
// end of building the root: each is written to the scratch tmpfs (the
// root while the new one is assembled; the binds keep its files after it
// is detached) and bound over the host's file, or over the host's link
// itself when that is a symbolic link. A path the host lacks is skipped.
func bindEtc(files []spec.EtcFile) error {
	for i, f := range files {
		var st unix.Stat_t
		if err := unix.Lstat(newRoot+f.Path, &st); errors.Is(err, unix.ENOENT) {
			continue
		}
		src := fmt.Sprintf("/etc-%d", i)
		if err := os.WriteFile(src, []byte(f.Content), 0o644); err != nil {
			return err
		}
		fd, err := cloneOnto("/", src, f.Path, false, true)
		if err == nil {
			err = setAttr(fd, f.Path, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, false)
			unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("binding the sandbox's own %s: %w", f.Path, err)
		}
	}
	return nil
}

// maxUnreachable bounds the destinations a command's end reports, so
// that the report fits the status message; later ones are counted in the
// last.
const maxUnreachable = 32

// unreachables collects a command's Unreachable destinations from its
// connect supervisor, which calls record after each inet connect (and
// refuse for each it refused in transparent mode).
type unreachables struct {
	mu sync.Mutex
	m  map[unreachKey]int
	// enetReason is the reason of an ENETUNREACH: "" (the network is
	// off) but in a sandbox with an allow-list whose kernel refused
	// transparent networking.
	enetReason string
}

// newUnreachables is the collector for a command of spec (read after
// setupProxy, which may have turned Transparent off).
func newUnreachables(sp *spec.Spec) *unreachables {
	u := &unreachables{}
	if sp.Net.Proxy && !sp.Net.ProxyOff {
		u.enetReason = "not carried: only the proxy variables reach the allow-list here (transparent networking unavailable)"
	}
	return u
}

type unreachKey struct {
	dst    netip.AddrPort
	reason string
}

func (u *unreachables) record(_ int, dst netip.AddrPort, errno unix.Errno) {
	if errno != unix.ENETUNREACH {
		return
	}
	u.add(dst, u.enetReason)
}

func (u *unreachables) refuse(dst netip.AddrPort, reason string) { u.add(dst, reason) }

func (u *unreachables) add(dst netip.AddrPort, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[unreachKey]int{}
	}
	k := unreachKey{dst, reason}
	if _, ok := u.m[k]; !ok && len(u.m) >= maxUnreachable {
		k = unreachKey{reason: reason} // counted with the others
	}
	u.m[k]++
}

// list is what was recorded, by address.
func (u *unreachables) list() []spec.Unreachable {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []spec.Unreachable
	for k, n := range u.m {
		a := "(other addresses)"
		if k.dst.IsValid() {
			a = k.dst.Addr().String()
		}
		out = append(out, spec.Unreachable{Addr: a, Port: k.dst.Port(), Count: n, Reason: k.reason})
	}
	slices.SortFunc(out, func(a, b spec.Unreachable) int {
		return cmp.Or(cmp.Compare(a.Addr, b.Addr), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// recordsUnreachable reports whether the command's connect supervisor
// records the destinations it cannot reach: with the network off, in a
// namespace of the sandbox's own.
func recordsUnreachable(sp *spec.Spec) bool {
	return sp.Net.Resolver && sp.Walls.MediateUnixConnect && !sp.Degraded.On && !sp.Net.Transparent
}
