package loopguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// GetExtendedTcpTable classes: listeners and connections, each with its
// owning process (and, for the module class, when it was bound).
const (
	tcpTableOwnerPIDAll    = 5
	tcpTableOwnerModuleAll = 8
)

// Table reads the system's IPv4 and IPv6 TCP tables.
func Table() ([]Row, error) {
	var rows []Row
	for _, fam := range []struct {
		af    uint32
		parse func([]byte) ([]Row, error)
	}{{windows.AF_INET, ParseTCP4Table}, {windows.AF_INET6, ParseTCP6Table}} {
		b, err := tcpTable(fam.af)
		if err != nil {
			return nil, err
		}
		r, err := fam.parse(b)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// Table4Module reads the IPv4 TCP table with each row's bind time, for
// the check of a connection to the proxy (which listens on 127.0.0.1).
func Table4Module() ([]Row, error) {
	b, err := tcpTableClass(windows.AF_INET, tcpTableOwnerModuleAll)
	if err != nil {
		return nil, err
	}
	return ParseTCP4ModuleTable(b)
}

// ProcessStarts returns when each of pids started (FILETIME), read from
// the system's process list: unlike OpenProcess it needs no access to the
// processes, which belong to the sandbox user. A pid missing from the
// list is missing from the map.
func ProcessStarts(pids []uint32) (map[uint32]int64, error) {
	size := uint32(256 << 10)
	for range 8 {
		buf := make([]uint64, (size+7)/8)
		var n uint32
		err := windows.NtQuerySystemInformation(windows.SystemProcessInformation, unsafe.Pointer(&buf[0]), uint32(len(buf)*8), &n)
		if errors.Is(err, windows.STATUS_INFO_LENGTH_MISMATCH) {
			size = max(n, size) + 64<<10
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("NtQuerySystemInformation(SystemProcessInformation)", err)
		}
		want := map[uint32]bool{}
		for _, p := range pids {
			want[p] = true
		}
		out := map[uint32]int64{}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
		for off := uintptr(0); off+unsafe.Sizeof(windows.SYSTEM_PROCESS_INFORMATION{}) <= uintptr(len(b)); {
			e := (*windows.SYSTEM_PROCESS_INFORMATION)(unsafe.Pointer(&b[off]))
			if pid := uint32(e.UniqueProcessID); want[pid] {
				out[pid] = e.CreateTime
			}
			if e.NextEntryOffset == 0 {
				break
			}
			off += uintptr(e.NextEntryOffset)
		}
		return out, nil
	}
	return nil, errors.New("NtQuerySystemInformation: the process list kept growing")
}

func tcpTable(af uint32) ([]byte, error) { return tcpTableClass(af, tcpTableOwnerPIDAll) }

func tcpTableClass(af, class uint32) ([]byte, error) {
	size := uint32(16 << 10)
	// The table can grow between the call that sizes it and the one that
	// fills it; retry a few times with the size Windows asks for.
	for range 8 {
		// uint64 words: the buffer must be aligned for the rows.
		buf := make([]uint64, (size+7)/8)
		b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
		n := uint32(len(b))
		err := getExtendedTcpTable(&b[0], &n, false, af, class, 0)
		switch {
		case err == nil:
			return b[:n:n], nil
		case errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER):
			size = n + 4<<10
		default:
			return nil, os.NewSyscallError("GetExtendedTcpTable", err)
		}
	}
	return nil, errors.New("GetExtendedTcpTable: the table kept growing")
}

// JobPIDs lists the processes in job now (QueryInformationJobObject with
// JobObjectBasicProcessIdList; the handle needs JOB_OBJECT_QUERY).
func JobPIDs(job windows.Handle) ([]uint32, error) {
	n := 64
	for range 8 {
		buf := make([]uint64, 1+n) // two DWORDs, then n ULONG_PTRs
		b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
		err := windows.QueryInformationJobObject(job, windows.JobObjectBasicProcessIdList,
			uintptr(unsafe.Pointer(&b[0])), uint32(len(b)), nil)
		if err != nil && !errors.Is(err, windows.ERROR_MORE_DATA) {
			return nil, os.NewSyscallError("QueryInformationJobObject(JobObjectBasicProcessIdList)", err)
		}
		pids, complete, perr := ParsePIDList(b, int(unsafe.Sizeof(uintptr(0))))
		if perr != nil {
			return nil, perr
		}
		if err == nil && complete {
			return pids, nil
		}
		n *= 4
	}
	return nil, errors.New("job process list: the job kept growing")
}

// Alive reports whether process pid is running (for [Claim]). A process
// this user cannot open counts as alive: its record is left alone.
func Alive(pid uint32) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return !errors.Is(err, windows.ERROR_INVALID_PARAMETER) // no such process
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return true
	}
	return code == 259 // STILL_ACTIVE
}

// soExclusiveAddrUse is SO_EXCLUSIVEADDRUSE, ((int)(~SO_REUSEADDR)).
const soExclusiveAddrUse = ^windows.SO_REUSEADDR

// Listen listens on 127.0.0.1:port with SO_EXCLUSIVEADDRUSE, so that no
// other socket (SO_REUSEADDR included) can bind the same port on
// 127.0.0.1 or the wildcard address while agentbox holds it.
func Listen(port int) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = windows.SetsockoptInt(windows.Handle(fd), windows.SOL_SOCKET, soExclusiveAddrUse, 1)
		}); err != nil {
			return err
		}
		if serr != nil {
			return os.NewSyscallError("setsockopt(SO_EXCLUSIVEADDRUSE)", serr)
		}
		return nil
	}}
	return lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port)).String())
}

// Guard authenticates the connections of one run's proxy listeners: each
// accepted connection is served only if [Decide] finds its client in the
// run's job. Until the job is known ([Guard.SetJob]) Accept waits: the
// command can connect as soon as it runs, before agentbox has the job.
type Guard struct {
	// Refused is called for each refused connection with the proxy
	// port it came to and why; the proxy reports it.
	Refused func(port uint16, err error)

	once  sync.Once
	ready chan struct{}
	mu    sync.Mutex
	job   windows.Handle // 0 after Fail: every connection is refused
}

// NewGuard returns a guard waiting for its job.
func NewGuard(refused func(port uint16, err error)) *Guard {
	return &Guard{Refused: refused, ready: make(chan struct{})}
}

// SetJob gives the guard the run's job. The caller keeps job open for as
// long as the listeners accept, and closes it afterwards.
func (g *Guard) SetJob(job windows.Handle) {
	g.mu.Lock()
	g.job = job
	g.mu.Unlock()
	g.once.Do(func() { close(g.ready) })
}

// Fail releases waiting Accepts with no job: everything is refused.
func (g *Guard) Fail() { g.SetJob(0) }

// Allow decides one connection by its two ends.
func (g *Guard) Allow(local, peer netip.AddrPort) (uint32, error) {
	<-g.ready
	g.mu.Lock()
	job := g.job
	g.mu.Unlock()
	if job == 0 {
		return 0, errors.New("the run's job is unknown, so no connection is served")
	}
	// Table first: a process that joined the job after connecting is
	// still seen in the job list taken afterwards.
	rows, err := Table4Module()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnidentified, err)
	}
	members, err := JobPIDs(job)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnidentified, err)
	}
	// Start times only sharpen the check (a reused process id); without
	// them the id alone decides, as Authorize documents.
	started, _ := ProcessStarts(members)
	return Decide(rows, local, peer, members, started)
}

// Wrap returns ln whose Accept returns only connections Allow admits;
// the others are closed and reported.
func (g *Guard) Wrap(ln net.Listener) net.Listener { return &guarded{Listener: ln, g: g} }

type guarded struct {
	net.Listener
	g *Guard
}

func (l *guarded) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		local, err1 := netip.ParseAddrPort(c.LocalAddr().String())
		peer, err2 := netip.ParseAddrPort(c.RemoteAddr().String())
		if err1 != nil || err2 != nil {
			c.Close()
			l.refused(local, fmt.Errorf("%w: unparsable addresses %s, %s", ErrUnidentified, c.LocalAddr(), c.RemoteAddr()))
			continue
		}
		if _, err := l.g.Allow(local, peer); err != nil {
			c.Close()
			l.refused(local, err)
			continue
		}
		return c, nil
	}
}

func (l *guarded) refused(local netip.AddrPort, err error) {
	if l.g.Refused != nil {
		l.g.Refused(local.Port(), err)
	}
}
