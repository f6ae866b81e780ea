package unixsock

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Constants of <linux/sock_diag.h> and <linux/unix_diag.h>.
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	udiagShowVFS     = 0x2
	unixDiagVFS      = 1
)

// BoundInThisNetns reports whether the socket file st (as returned by
// stat) is bound by a unix socket of the caller's network namespace. The
// sandbox has a network namespace of its own when the network is off, so
// this tells a socket the command created from a host daemon's socket that
// merely lies inside a writable root (/tmp/.X11-unix, an ssh agent under
// /tmp): sock_diag lists only the sockets of the caller's namespace.
func BoundInThisNetns(st *unix.Stat_t) (bool, error) {
	// The kernel reports the vfs device as its internal dev_t.
	wantDev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	wantIno := uint32(st.Ino)
	ne := binary.NativeEndian
	found := false
	err := unixDiagDump(0xffffffff, udiagShowVFS, func(msg []byte) {
		for _, a := range parseAttrs(msg[16:]) {
			if a.typ == unixDiagVFS && len(a.val) >= 8 &&
				ne.Uint32(a.val[0:]) == wantIno && uint64(ne.Uint32(a.val[4:])) == uint64(wantDev) {
				found = true
			}
		}
	})
	return found, err
}

// unixDiagDump asks sock_diag for the unix sockets of the caller's network
// namespace in the states of the mask (1<<state; all bits for every
// state), with the attributes show asks for, and calls each with every
// unix_diag_msg (family, type, state, pad, ino, cookie[2]: 16 bytes, then
// attributes; shorter messages are skipped).
func unixDiagDump(states, show uint32, each func(msg []byte)) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return &os.SyscallError{Syscall: "socket(NETLINK_SOCK_DIAG)", Err: err}
	}
	defer unix.Close(fd)

	// nlmsghdr (16) + unix_diag_req (24).
	req := make([]byte, 16+24)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1)
	req[16] = unix.AF_UNIX
	ne.PutUint32(req[20:], states)
	ne.PutUint32(req[28:], show)
	ne.PutUint32(req[32:], 0xffffffff) // cookie: none
	ne.PutUint32(req[36:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return &os.SyscallError{Syscall: "sendto(sock_diag)", Err: err}
	}
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.SyscallError{Syscall: "recvfrom(sock_diag)", Err: err}
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				return fmt.Errorf("sock_diag: error reply")
			}
			if len(m.Data) >= 16 {
				each(m.Data)
			}
		}
	}
}

type attr struct {
	typ uint16
	val []byte
}

// parseAttrs splits netlink attributes (struct nlattr, 4-byte aligned).
func parseAttrs(b []byte) []attr {
	var out []attr
	ne := binary.NativeEndian
	for len(b) >= 4 {
		l := int(ne.Uint16(b[0:]))
		if l < 4 || l > len(b) {
			break
		}
		out = append(out, attr{ne.Uint16(b[2:]) &^ 0xc000, b[4:l]})
		l = (l + 3) &^ 3
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return out
}
