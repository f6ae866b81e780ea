// Package loopguard keeps the Windows elevated sandbox's proxy ports to
// the run they belong to.
//
// agentbox-setup (elevated, run once) leaves a small fixed range of TCP
// ports on 127.0.0.1 open to the Offline sandbox user; everything else
// stays blocked by the firewall. Runs share that range and that user, so
// the firewall alone cannot tell runs apart. Three checks close the gap:
//
//   - Before a run whose user may reach the range, no listener agentbox
//     does not own may hold a port of it ([Foreign]): a sandboxed command
//     could otherwise reach whatever local service listens there. This
//     fails closed; skipping to another port would not help, since the
//     firewall opens the whole range.
//   - Each run's proxy listens on free ports of the range ([Candidates]),
//     with SO_EXCLUSIVEADDRUSE, and registers them so that concurrent runs
//     recognise them as agentbox's.
//   - On every accepted connection the proxy finds the process that owns
//     the client end in the system's TCP table ([Peer]) and serves it only
//     when that process is in the run's job object, and was not started
//     after the socket was bound (a reused process id: [Authorize]);
//     anything else is refused and reported. A secret in the environment could not
//     do this: the Offline user's processes of one run can read another
//     run's environment.
//
// The table and job parsing, the decisions and the port choice are
// platform-free and tested on every OS; the Win32 calls live in the
// _windows files.
package loopguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// DefaultFirst and DefaultCount are the range agentbox-setup opens by
// default: below Windows' dynamic (ephemeral) range 49152-65535, so no
// program binding port 0 lands in it by chance, and clear of the usual
// development servers' ports. Two ports (HTTP and SOCKS5) per run, so
// eight allow-listed runs at once.
const (
	DefaultFirst = 41630
	DefaultCount = 16
)

// DefaultPorts returns the default range as a list.
func DefaultPorts() []int { return PortRange(DefaultFirst, DefaultCount) }

// PortRange returns count ports from first.
func PortRange(first, count int) []int {
	p := make([]int, 0, count)
	for i := range count {
		p = append(p, first+i)
	}
	return p
}

// MIB_TCP_STATE values this package uses.
const (
	StateListen   = 2
	StateTimeWait = 11
)

// Row is one entry of the system's TCP table (GetExtendedTcpTable with an
// OWNER_PID class): a listener or one end of a connection.
type Row struct {
	Local, Remote netip.AddrPort
	State         uint32
	PID           uint32
	// Created is when the connection's context was bound (100 ns since
	// 1601, as FILETIME), from the OWNER_MODULE classes; 0 when the
	// table did not say.
	Created int64
}

// Sizes of MIB_TCPROW_OWNER_PID, MIB_TCP6ROW_OWNER_PID and
// MIB_TCPROW_OWNER_MODULE.
const (
	row4Size       = 24
	row6Size       = 56
	row4ModuleSize = 160
)

// ParseTCP4Table decodes a MIB_TCPTABLE_OWNER_PID buffer: a DWORD count,
// then rows of dwState, dwLocalAddr, dwLocalPort, dwRemoteAddr,
// dwRemotePort, dwOwningPid. Addresses and the low 16 bits of the ports
// are in network byte order; the rest is little-endian (every Windows
// architecture).
func ParseTCP4Table(b []byte) ([]Row, error) {
	return parseTable(b, 4, row4Size, "TCP table", tcp4Row)
}

// tcp4Row decodes the six MIB_TCPROW_OWNER_PID fields at the start of r,
// which both IPv4 tables' rows begin with.
func tcp4Row(r []byte) Row {
	return Row{
		State:  binary.LittleEndian.Uint32(r[0:]),
		Local:  netip.AddrPortFrom(netip.AddrFrom4([4]byte(r[4:8])), binary.BigEndian.Uint16(r[8:])),
		Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte(r[12:16])), binary.BigEndian.Uint16(r[16:])),
		PID:    binary.LittleEndian.Uint32(r[20:]),
	}
}

// ParseTCP4ModuleTable decodes a MIB_TCPTABLE_OWNER_MODULE buffer: a
// DWORD count, four bytes of padding (the rows hold a LARGE_INTEGER),
// then rows of the six MIB_TCPROW_OWNER_PID fields, liCreateTimestamp and
// OwningModuleInfo[16] (ULONGLONGs, ignored).
func ParseTCP4ModuleTable(b []byte) ([]Row, error) {
	return parseTable(b, 8, row4ModuleSize, "TCP module table", func(r []byte) Row {
		row := tcp4Row(r)
		row.Created = int64(binary.LittleEndian.Uint64(r[24:]))
		return row
	})
}

// ParseTCP6Table decodes a MIB_TCP6TABLE_OWNER_PID buffer: a DWORD count,
// then rows of ucLocalAddr[16], dwLocalScopeId, dwLocalPort,
// ucRemoteAddr[16], dwRemoteScopeId, dwRemotePort, dwState, dwOwningPid.
// Scope IDs are dropped: loopback and the unspecified address have none.
func ParseTCP6Table(b []byte) ([]Row, error) {
	return parseTable(b, 4, row6Size, "TCP table", func(r []byte) Row {
		return Row{
			Local:  netip.AddrPortFrom(netip.AddrFrom16([16]byte(r[0:16])), binary.BigEndian.Uint16(r[20:])),
			Remote: netip.AddrPortFrom(netip.AddrFrom16([16]byte(r[24:40])), binary.BigEndian.Uint16(r[44:])),
			State:  binary.LittleEndian.Uint32(r[48:]),
			PID:    binary.LittleEndian.Uint32(r[52:]),
		}
	})
}

// parseTable checks a table's DWORD row count against its length and
// decodes each of its rows of size bytes, which start header bytes in,
// with row (what names the table in errors).
func parseTable(b []byte, header, size int, what string, row func([]byte) Row) ([]Row, error) {
	if len(b) < header {
		return nil, fmt.Errorf("%s: %d bytes, too short for its count", what, len(b))
	}
	n := int(binary.LittleEndian.Uint32(b))
	rows := b[header:]
	if n > len(rows)/size {
		return nil, fmt.Errorf("%s: %d rows do not fit in %d bytes", what, n, len(b))
	}
	out := make([]Row, 0, n)
	for i := range n {
		out = append(out, row(rows[i*size:(i+1)*size]))
	}
	return out, nil
}

// ParsePIDList decodes a JOBOBJECT_BASIC_PROCESS_ID_LIST buffer
// (NumberOfAssignedProcesses, NumberOfProcessIdsInList, then ULONG_PTR
// ids of ptrSize bytes). complete is false when the job held more
// processes than the buffer listed: the caller retries with a larger one,
// since a missing member would be refused.
func ParsePIDList(b []byte, ptrSize int) (pids []uint32, complete bool, err error) {
	if ptrSize != 4 && ptrSize != 8 {
		return nil, false, fmt.Errorf("job process list: pointer size %d", ptrSize)
	}
	// The ULONG_PTR array follows the two DWORDs at offset 8, which is
	// already pointer-aligned on 64-bit Windows.
	const hdr = 8
	if len(b) < hdr {
		return nil, false, fmt.Errorf("job process list: %d bytes, too short", len(b))
	}
	assigned := binary.LittleEndian.Uint32(b[0:])
	listed := int(binary.LittleEndian.Uint32(b[4:]))
	if listed > (len(b)-hdr)/ptrSize {
		return nil, false, fmt.Errorf("job process list: %d ids do not fit in %d bytes", listed, len(b))
	}
	for i := range listed {
		off := hdr + i*ptrSize
		var id uint64
		if ptrSize == 8 {
			id = binary.LittleEndian.Uint64(b[off:])
		} else {
			id = uint64(binary.LittleEndian.Uint32(b[off:]))
		}
		if id > 0xFFFFFFFF {
			return nil, false, fmt.Errorf("job process list: id %d out of range", id)
		}
		pids = append(pids, uint32(id))
	}
	return pids, uint32(listed) >= assigned, nil
}

// reaches reports whether a listener bound to a receives connections the
// sandbox user makes to 127.0.0.1, the one loopback address the firewall
// leaves open: 127.0.0.1 itself, the unspecified address of either family
// (an IPv6 wildcard may be dual-stack; agentbox cannot tell, so it counts)
// and their IPv4-mapped forms.
func reaches(a netip.Addr) bool {
	a = a.Unmap()
	return a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || a.IsUnspecified()
}

// Listener is a listening socket on one of the open ports.
type Listener struct {
	Addr netip.AddrPort
	PID  uint32
}

// ForeignError says that a program other than agentbox listens on a port
// the firewall leaves open to the sandbox user.
type ForeignError struct {
	Listeners []Listener
	// Open are the ports the firewall leaves open (the setup marker's).
	Open []int
}

func (e *ForeignError) Error() string {
	var parts []string
	for _, l := range e.Listeners {
		parts = append(parts, fmt.Sprintf("port %d (%s) is held by process %d", l.Addr.Port(), l.Addr.Addr(), l.PID))
	}
	rng := "the ports agentbox-setup opened"
	if len(e.Open) > 0 {
		rng = fmt.Sprintf("%d-%d", slices.Min(e.Open), slices.Max(e.Open))
	}
	return fmt.Sprintf("the firewall leaves agentbox's proxy ports on 127.0.0.1 open to the sandbox user and %s, which is not agentbox's proxy, so a sandboxed command could reach it; "+
		"stop that program (`Get-Process -Id PID` names it) or make it listen outside %s",
		strings.Join(parts, ", "), rng)
}

// Foreign returns the listeners on open ports that could receive the
// sandbox user's connections to 127.0.0.1 and are not agentbox's: a
// listener is agentbox's when owned (the registered proxy ports, port to
// the registering process) names its port and its process.
func Foreign(open []int, rows []Row, owned map[int]uint32) []Listener {
	var bad []Listener
	for _, r := range rows {
		p := int(r.Local.Port())
		if r.State != StateListen || !slices.Contains(open, p) || !reaches(r.Local.Addr()) {
			continue
		}
		if pid, ok := owned[p]; ok && pid == r.PID && pid != 0 {
			continue
		}
		bad = append(bad, Listener{Addr: r.Local, PID: r.PID})
	}
	return bad
}

// Check is [Foreign] as an error: nil, or a *[ForeignError] naming every
// foreign listener.
func Check(open []int, rows []Row, owned map[int]uint32) error {
	if bad := Foreign(open, rows, owned); len(bad) > 0 {
		return &ForeignError{Listeners: bad, Open: open}
	}
	return nil
}

// Candidates returns the open ports no listener holds, in the order to
// try them: starting at start (modulo the range) so that concurrent runs
// tend to pick different ports, wrapping around. Binding may still fail
// (another run won the race); the caller then tries the next.
func Candidates(open []int, rows []Row, start int) []int {
	held := map[int]bool{}
	for _, r := range rows {
		if r.State == StateListen {
			held[int(r.Local.Port())] = true
		}
	}
	open = slices.Clone(open)
	slices.Sort(open)
	open = slices.Compact(open)
	if len(open) == 0 {
		return nil
	}
	start %= len(open)
	if start < 0 {
		start += len(open)
	}
	var out []int
	for i := range open {
		if p := open[(start+i)%len(open)]; !held[p] {
			out = append(out, p)
		}
	}
	return out
}

// ErrUnidentified means no process could be found for a connection's
// client end (it closed, or the table changed): the connection is refused.
var ErrUnidentified = errors.New("the connecting process could not be identified")

// Peer returns the client end of a connection the proxy accepted: local
// is the proxy's end (the accepted socket's local address), peer the
// client's. The client's row is the one whose local end is peer and whose
// remote end is local; the proxy's own row is the mirror image and is not
// taken. No row, or rows naming different processes, or process 0 (a
// closed connection in TIME_WAIT), is [ErrUnidentified].
func Peer(rows []Row, local, peer netip.AddrPort) (Row, error) {
	local, peer = unmap(local), unmap(peer)
	var got Row
	found := false
	for _, r := range rows {
		if unmap(r.Local) != peer || unmap(r.Remote) != local {
			continue
		}
		if r.PID == 0 || r.State == StateListen || r.State == StateTimeWait {
			return Row{}, fmt.Errorf("%w (its end of %s is in state %d, process %d)", ErrUnidentified, peer, r.State, r.PID)
		}
		if found && r.PID != got.PID {
			return Row{}, fmt.Errorf("%w (%s is owned by processes %d and %d)", ErrUnidentified, peer, got.PID, r.PID)
		}
		got, found = r, true
	}
	if !found {
		return Row{}, fmt.Errorf("%w (no TCP table entry for %s to %s)", ErrUnidentified, peer, local)
	}
	return got, nil
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// OutsideError says that a connection came from a process outside the
// run's job: another run's command, or any other program.
type OutsideError struct{ PID uint32 }

func (e *OutsideError) Error() string {
	return fmt.Sprintf("connection from process %d, which is not part of this run", e.PID)
}

// ReusedError says that the client's socket was bound before the process
// now holding its owner's id started: its owner was an earlier process
// with the same id (the socket lives on in another process), so the
// member of the run that now has the id is not who connected.
type ReusedError struct {
	PID             uint32
	Socket, Started int64
}

func (e *ReusedError) Error() string {
	return fmt.Sprintf("connection from a socket bound before process %d started (its process id was reused): not part of this run", e.PID)
}

// Authorize decides a connection whose client end is row, given the
// processes in the run's job now and when each started (FILETIME; a
// missing or 0 entry means unknown). Only a member is served, and not
// when the table shows the socket older than the member: then the
// member's id belonged to another, exited process when the socket was
// bound. With no times on either side the id alone decides.
func Authorize(row Row, members []uint32, started map[uint32]int64) error {
	if row.PID == 0 || !slices.Contains(members, row.PID) {
		return &OutsideError{PID: row.PID}
	}
	if st := started[row.PID]; row.Created != 0 && st != 0 && row.Created < st {
		return &ReusedError{PID: row.PID, Socket: row.Created, Started: st}
	}
	return nil
}

// Decide is the whole check for one accepted connection: the client's
// end from the TCP table, then its process's membership in the run's job.
func Decide(rows []Row, local, peer netip.AddrPort, members []uint32, started map[uint32]int64) (uint32, error) {
	r, err := Peer(rows, local, peer)
	if err != nil {
		return 0, err
	}
	return r.PID, Authorize(r, members, started)
}
