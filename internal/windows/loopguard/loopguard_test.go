package loopguard

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var (
	lo    = netip.MustParseAddr("127.0.0.1")
	proxy = netip.AddrPortFrom(lo, 41631)
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// row4 encodes one MIB_TCPROW_OWNER_PID as Windows lays it out.
func row4(state uint32, local, remote netip.AddrPort, pid uint32) []byte {
	b := make([]byte, row4Size)
	binary.LittleEndian.PutUint32(b[0:], state)
	l, r := local.Addr().As4(), remote.Addr().As4()
	copy(b[4:], l[:])
	binary.BigEndian.PutUint16(b[8:], local.Port())
	b[10], b[11] = 0xAA, 0xBB // the DWORD's high half is junk Windows leaves
	copy(b[12:], r[:])
	binary.BigEndian.PutUint16(b[16:], remote.Port())
	binary.LittleEndian.PutUint32(b[20:], pid)
	return b
}

func row6(state uint32, local, remote netip.AddrPort, pid uint32) []byte {
	b := make([]byte, row6Size)
	l, r := local.Addr().As16(), remote.Addr().As16()
	copy(b[0:], l[:])
	binary.LittleEndian.PutUint32(b[16:], 7) // scope id, dropped
	binary.BigEndian.PutUint16(b[20:], local.Port())
	copy(b[24:], r[:])
	binary.BigEndian.PutUint16(b[44:], remote.Port())
	binary.LittleEndian.PutUint32(b[48:], state)
	binary.LittleEndian.PutUint32(b[52:], pid)
	return b
}

func table(rows ...[]byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(rows)))
	for _, r := range rows {
		b = append(b, r...)
	}
	return b
}

func TestParseTables(t *testing.T) {
	b := table(row4(StateListen, ap("127.0.0.1:41631"), ap("0.0.0.0:0"), 900),
		row4(5, ap("127.0.0.1:50123"), ap("127.0.0.1:41631"), 1234))
	got, err := ParseTCP4Table(b)
	want := []Row{{Local: ap("127.0.0.1:41631"), Remote: ap("0.0.0.0:0"), State: StateListen, PID: 900},
		{Local: ap("127.0.0.1:50123"), Remote: ap("127.0.0.1:41631"), State: 5, PID: 1234}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("v4: %v, %v", got, err)
	}
	// The module class: padding after the count, a timestamp after the
	// six DWORDs, 128 bytes of module info.
	mrow := make([]byte, row4ModuleSize)
	copy(mrow, row4(5, ap("127.0.0.1:50123"), ap("127.0.0.1:41631"), 1234))
	binary.LittleEndian.PutUint64(mrow[24:], 133_000_000_000_000_000)
	for i := 32; i < len(mrow); i++ {
		mrow[i] = 0xEE
	}
	mb := append(binary.LittleEndian.AppendUint32(nil, 1), 0, 0, 0, 0)
	mb = append(mb, mrow...)
	got, err = ParseTCP4ModuleTable(mb)
	if err != nil || len(got) != 1 || got[0] != (Row{Local: ap("127.0.0.1:50123"), Remote: ap("127.0.0.1:41631"), State: 5, PID: 1234, Created: 133_000_000_000_000_000}) {
		t.Fatalf("module table: %v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, mb[:7], mb[:len(mb)-1]} {
		if _, err := ParseTCP4ModuleTable(bad); err == nil {
			t.Errorf("ParseTCP4ModuleTable(%d bytes) accepted", len(bad))
		}
	}
	b6 := table(row6(StateListen, ap("[::]:41632"), ap("[::]:0"), 77))
	got, err = ParseTCP6Table(b6)
	if err != nil || len(got) != 1 || got[0] != (Row{Local: ap("[::]:41632"), Remote: ap("[::]:0"), State: StateListen, PID: 77}) {
		t.Fatalf("v6: %v, %v", got, err)
	}
	// Truncated or lying buffers are errors, never a panic or a short read
	// taken as the whole table.
	for _, bad := range [][]byte{nil, {1, 0}, b[:len(b)-1], binary.LittleEndian.AppendUint32(nil, 1<<30)} {
		if _, err := ParseTCP4Table(bad); err == nil {
			t.Errorf("ParseTCP4Table(%d bytes) accepted", len(bad))
		}
		if _, err := ParseTCP6Table(bad); err == nil {
			t.Errorf("ParseTCP6Table(%d bytes) accepted", len(bad))
		}
	}
	if got, err := ParseTCP4Table(table()); err != nil || len(got) != 0 {
		t.Errorf("empty table: %v, %v", got, err)
	}
}

func TestParsePIDList(t *testing.T) {
	b := make([]byte, 8+3*8)
	binary.LittleEndian.PutUint32(b[0:], 3)
	binary.LittleEndian.PutUint32(b[4:], 3)
	for i, pid := range []uint64{10, 20, 30} {
		binary.LittleEndian.PutUint64(b[8+8*i:], pid)
	}
	pids, complete, err := ParsePIDList(b, 8)
	if err != nil || !complete || !slices.Equal(pids, []uint32{10, 20, 30}) {
		t.Fatalf("64-bit: %v %v %v", pids, complete, err)
	}
	// More processes in the job than listed: incomplete, so the caller
	// retries rather than refusing a member it did not see.
	binary.LittleEndian.PutUint32(b[0:], 5)
	if _, complete, _ := ParsePIDList(b, 8); complete {
		t.Error("5 assigned, 3 listed: reported complete")
	}
	b32 := []byte{1, 0, 0, 0, 1, 0, 0, 0, 42, 0, 0, 0}
	if pids, complete, err := ParsePIDList(b32, 4); err != nil || !complete || !slices.Equal(pids, []uint32{42}) {
		t.Errorf("32-bit: %v %v %v", pids, complete, err)
	}
	for _, bad := range [][]byte{nil, b[:7], {0, 0, 0, 0, 9, 0, 0, 0}} {
		if _, _, err := ParsePIDList(bad, 8); err == nil {
			t.Errorf("ParsePIDList(%v) accepted", bad)
		}
	}
	if _, _, err := ParsePIDList(b, 2); err == nil {
		t.Error("pointer size 2 accepted")
	}
}

// The connection table as Windows shows one accepted connection: the
// client's end (owned by the client) and the proxy's end (owned by
// agentbox), mirror images of each other.
func conn(client netip.AddrPort, clientPID uint32) []Row {
	return []Row{
		{Local: client, Remote: proxy, State: 5, PID: clientPID},
		{Local: proxy, Remote: client, State: 5, PID: 900},
	}
}

func TestDecide(t *testing.T) {
	client := ap("127.0.0.1:50123")
	members := []uint32{1234, 1300}
	rows := append(conn(client, 1234), conn(ap("127.0.0.1:50999"), 4444)...)
	rows = append(rows, Row{Local: proxy, State: StateListen, PID: 900})
	for _, tc := range []struct {
		name    string
		rows    []Row
		peer    netip.AddrPort
		members []uint32
		pid     uint32
		outside bool // refused: another process
		unknown bool // refused: not identified
	}{
		{name: "member", rows: rows, peer: client, members: members, pid: 1234},
		{name: "another run's process", rows: rows, peer: ap("127.0.0.1:50999"), members: members, pid: 4444, outside: true},
		// The proxy's own end has local == proxy: never mistaken for the
		// client, even though agentbox's pid would then be "identified".
		{name: "no client row (closed before the check)", rows: rows[1:2], peer: client, members: []uint32{900}, unknown: true},
		{name: "time-wait row has pid 0", rows: []Row{{Local: client, Remote: proxy, State: StateTimeWait}}, peer: client, members: []uint32{0}, unknown: true},
		{name: "two owners for one end", rows: append(conn(client, 1234), Row{Local: client, Remote: proxy, State: 5, PID: 4444}), peer: client, members: members, unknown: true},
		{name: "IPv4-mapped spelling of the same end", rows: conn(client, 1300), peer: ap("[::ffff:127.0.0.1]:50123"), members: members, pid: 1300},
		{name: "empty job", rows: rows, peer: client, members: nil, pid: 1234, outside: true},
		{name: "same port, other client address", rows: conn(ap("127.0.0.2:50123"), 1234), peer: client, members: members, unknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, err := Decide(tc.rows, proxy, tc.peer, tc.members, nil)
			var oe *OutsideError
			switch {
			case tc.unknown:
				if !errors.Is(err, ErrUnidentified) {
					t.Fatalf("got pid %d, %v; want unidentified", pid, err)
				}
			case tc.outside:
				if !errors.As(err, &oe) || oe.PID != tc.pid {
					t.Fatalf("got %v; want refused as outside the run (pid %d)", err, tc.pid)
				}
			default:
				if err != nil || pid != tc.pid {
					t.Fatalf("got pid %d, %v; want %d served", pid, err, tc.pid)
				}
			}
		})
	}
	if err := Authorize(Row{}, []uint32{0}, nil); err == nil {
		t.Error("pid 0 authorized")
	}
}

// TestAuthorizeReusedPID: a socket bound before its owner's id was given
// to the run's member is the exited creator's, not the member's.
func TestAuthorizeReusedPID(t *testing.T) {
	members := []uint32{1234}
	const started = 1_000_000
	for _, tc := range []struct {
		name    string
		created int64
		start   map[uint32]int64
		reused  bool
	}{
		{"bound after the member started", started + 1, map[uint32]int64{1234: started}, false},
		{"bound the same tick", started, map[uint32]int64{1234: started}, false},
		{"bound before: the id was reused", started - 1, map[uint32]int64{1234: started}, true},
		{"table gives no time", 0, map[uint32]int64{1234: started}, false},
		{"start time unknown", started - 1, nil, false},
	} {
		err := Authorize(Row{PID: 1234, Created: tc.created}, members, tc.start)
		var re *ReusedError
		if got := errors.As(err, &re); got != tc.reused || (!tc.reused && err != nil) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	rows := conn(ap("127.0.0.1:50123"), 1234)
	rows[0].Created = started - 5
	if _, err := Decide(rows, proxy, ap("127.0.0.1:50123"), members, map[uint32]int64{1234: started}); err == nil ||
		!strings.Contains(err.Error(), "reused") {
		t.Errorf("Decide with a reused id: %v", err)
	}
}

func TestForeign(t *testing.T) {
	open := PortRange(41630, 4)
	owned := map[int]uint32{41630: 900, 41631: 900, 41632: 901}
	rows := []Row{
		{Local: ap("127.0.0.1:41630"), State: StateListen, PID: 900},   // ours
		{Local: ap("127.0.0.1:41631"), State: StateListen, PID: 900},   // ours
		{Local: ap("127.0.0.1:41632"), State: StateListen, PID: 555},   // registered port, other process
		{Local: ap("0.0.0.0:41633"), State: StateListen, PID: 600},     // wildcard: reached via 127.0.0.1
		{Local: ap("[::]:41633"), State: StateListen, PID: 601},        // maybe dual-stack
		{Local: ap("127.0.0.2:41633"), State: StateListen, PID: 602},   // firewall blocks 127.0.0.2
		{Local: ap("[::1]:41633"), State: StateListen, PID: 603},       // and ::1
		{Local: ap("192.168.1.5:41633"), State: StateListen, PID: 604}, // and every other address
		{Local: ap("127.0.0.1:8080"), State: StateListen, PID: 605},    // not in the range
		{Local: ap("127.0.0.1:41633"), Remote: ap("127.0.0.1:9"), State: 5, PID: 606},
		{Local: ap("[::ffff:127.0.0.1]:41633"), State: StateListen, PID: 607},
	}
	var got []uint32
	for _, l := range Foreign(open, rows, owned) {
		got = append(got, l.PID)
	}
	if !slices.Equal(got, []uint32{555, 600, 601, 607}) {
		t.Fatalf("foreign listeners %v, want 555 600 601 607", got)
	}
	err := Check(open, rows, owned)
	var fe *ForeignError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "port 41632 (127.0.0.1) is held by process 555") ||
		!strings.Contains(err.Error(), "41630-41633") {
		t.Fatalf("Check: %v", err)
	}
	if err := Check(open, rows[:2], owned); err != nil {
		t.Fatalf("only agentbox's listeners: %v", err)
	}
	if (&ForeignError{}).Error() == "" {
		t.Error("empty ForeignError")
	}
}

func TestCandidates(t *testing.T) {
	open := PortRange(41630, 6)
	rows := []Row{
		{Local: ap("127.0.0.1:41631"), State: StateListen, PID: 1},
		{Local: ap("[::]:41634"), State: StateListen, PID: 2},
		{Local: ap("127.0.0.1:41632"), Remote: ap("127.0.0.1:80"), State: 5, PID: 3}, // a connection's end does not hold it
	}
	if got := Candidates(open, rows, 0); !slices.Equal(got, []int{41630, 41632, 41633, 41635}) {
		t.Errorf("from 0: %v", got)
	}
	if got := Candidates(open, rows, 4); !slices.Equal(got, []int{41635, 41630, 41632, 41633}) {
		t.Errorf("from 4: %v", got)
	}
	if got := Candidates(open, rows, -1); got[0] != 41635 {
		t.Errorf("negative start: %v", got)
	}
	if got := Candidates(nil, rows, 3); got != nil {
		t.Errorf("no range: %v", got)
	}
	if d := DefaultPorts(); len(d) != DefaultCount || d[0] != DefaultFirst || d[len(d)-1] >= 49152 {
		t.Errorf("default range %v: must stay below the dynamic ports", d)
	}
}

func TestRegistry(t *testing.T) {
	// Not t.TempDir: its RemoveAll fails under Wine (see
	// scripts/test-windows.sh); the files are removed one by one.
	dir, err := os.MkdirTemp("", "loopguard-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg := filepath.Join(dir, RegistryDir)
		ents, _ := os.ReadDir(reg)
		for _, e := range ents {
			os.Remove(filepath.Join(reg, e.Name()))
		}
		os.Remove(reg)
		os.Remove(dir)
	})
	if got := Owned(dir); len(got) != 0 {
		t.Fatalf("empty registry: %v", got)
	}
	live := map[uint32]bool{900: true, 901: true}
	alive := func(pid uint32) bool { return live[pid] }
	rel1, err := Claim(dir, 41630, 900, alive)
	if err != nil {
		t.Fatal(err)
	}
	rel2, err := Claim(dir, 41631, 901, alive)
	if err != nil {
		t.Fatal(err)
	}
	// A live process's record is not taken over.
	if _, err := Claim(dir, 41630, 902, alive); !errors.Is(err, ErrClaimed) {
		t.Fatalf("claiming a live record: %v", err)
	}
	// Junk never counts as agentbox's.
	for name, body := range map[string]string{"41632": "zero", "41633": "0", "notaport": "5", "70000": "5"} {
		if err := os.WriteFile(filepath.Join(dir, RegistryDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := Owned(dir); len(got) != 2 || got[41630] != 900 || got[41631] != 901 {
		t.Fatalf("owned %v", got)
	}
	// 900 died without releasing: 902 takes the record over, and 900's
	// release (were it to run) leaves 902's record alone.
	live[900] = false
	if _, err := Claim(dir, 41630, 902, alive); err != nil {
		t.Fatal(err)
	}
	rel1()
	rel2()
	if got := Owned(dir); len(got) != 1 || got[41630] != 902 {
		t.Fatalf("after release: %v", got)
	}
	// cleanup: the junk and dead records go, a live one stays; then all.
	live[902] = true
	if n := Prune(dir, alive); n != 4 {
		t.Errorf("pruned %d, want the 4 junk records", n)
	}
	if got := Owned(dir); len(got) != 1 {
		t.Errorf("after prune: %v", got)
	}
	live[902] = false
	if n := Prune(dir, alive); n != 1 {
		t.Errorf("pruned %d, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, RegistryDir)); err == nil {
		t.Error("empty registry directory left")
	}
}
