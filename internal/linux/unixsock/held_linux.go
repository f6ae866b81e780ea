package unixsock

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Without a network namespace of its own (--network), the sandbox shares
// the host's unix socket tables, so "bound in this network namespace" no
// longer tells the command's sockets from the host's. What still does is
// who holds the listening socket open: the command's own listeners are
// held by processes of the sandbox's pid namespace, and a host daemon's
// never are (the command cannot obtain a host daemon's listening socket:
// it cannot connect to receive one, and agentbox hands it no sockets but
// connected stream ones).

const (
	udiagShowName = 0x1
	unixDiagName  = 0
	tcpListen     = 10
)

// PathListenerHeldHere reports whether the unix socket bound at the socket
// file st is listening and held open by a process of the caller's pid
// namespace other than the caller itself.
func PathListenerHeldHere(st *unix.Stat_t) (bool, error) {
	wantDev := uint32(unix.Major(st.Dev)<<20 | unix.Minor(st.Dev))
	wantIno := uint32(st.Ino)
	inos, err := listeningSockets(func(attrs []attr) bool {
		for _, a := range attrs {
			if a.typ == unixDiagVFS && len(a.val) >= 8 &&
				binary.NativeEndian.Uint32(a.val[0:]) == wantIno && binary.NativeEndian.Uint32(a.val[4:]) == wantDev {
				return true
			}
		}
		return false
	})
	if err != nil {
		return false, err
	}
	return heldHere(inos)
}

// AbstractListenerHeldHere is PathListenerHeldHere for an abstract
// address: sunPath is the whole sun_path, the leading NUL included.
func AbstractListenerHeldHere(sunPath []byte) (bool, error) {
	inos, err := listeningSockets(func(attrs []attr) bool {
		for _, a := range attrs {
			if a.typ == unixDiagName && bytes.Equal(a.val, sunPath) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return false, err
	}
	return heldHere(inos)
}

// listeningSockets returns the socket inodes of the listening unix sockets of
// the caller's network namespace whose sock_diag attributes match.
func listeningSockets(match func([]attr) bool) (map[uint32]bool, error) {
	out := map[uint32]bool{}
	err := unixDiagDump(1<<tcpListen, udiagShowName|udiagShowVFS, func(msg []byte) {
		// The request asked for listeners only; check anyway.
		if msg[2] == tcpListen && match(parseAttrs(msg[16:])) {
			out[binary.NativeEndian.Uint32(msg[4:])] = true
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// heldHere reports whether a process of the caller's pid namespace (its
// /proc), other than the caller, has one of the socket inodes open. A
// process whose descriptors we may not read (non-dumpable) counts as not
// holding it: the connect is refused, which fails closed.
func heldHere(inos map[uint32]bool) (bool, error) {
	if len(inos) == 0 {
		return false, nil
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, f := range fds {
			l, err := os.Readlink(dir + f.Name())
			if err != nil || len(l) < 10 || l[:8] != "socket:[" || l[len(l)-1] != ']' {
				continue
			}
			ino, err := strconv.ParseUint(l[8:len(l)-1], 10, 32)
			if err == nil && inos[uint32(ino)] {
				return true, nil
			}
		}
	}
	return false, nil
}
