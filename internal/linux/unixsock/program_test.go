package unixsock

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// data encodes a struct seccomp_data for x/net/bpf's VM, which decodes
// loads big-endian: each 32-bit word goes big-endian at the offset where
// a little-endian kernel keeps it (see the seccomp package's tests).
func data(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	be := binary.BigEndian
	be.PutUint32(b[0:], nr)
	be.PutUint32(b[4:], arch)
	for i, v := range args {
		be.PutUint32(b[16+8*i:], uint32(v))
		be.PutUint32(b[16+8*i+4:], uint32(v>>32))
	}
	return b
}

// testArch holds the numbers a test input needs, from the seccomp
// package's table (compared with x/sys/unix there).
type testArch struct {
	audit                       uint32
	x32                         bool
	connect, socket, socketpair uint32
}

const x32SyscallBit = 0x40000000

// vmFor is buildProgram's program for arch name in a BPF interpreter;
// when t fails, its log shows the program.
func vmFor(t *testing.T, name string, metadata, files bool) *bpf.VM {
	t.Helper()
	prog, err := buildProgram(name, metadata, files)
	if err != nil {
		t.Fatal(err)
	}
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatal("undecodable program")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s program (metadata %v, files %v):", name, metadata, files)
			for i, ins := range insns {
				t.Logf("%3d: %v", i, ins)
			}
		}
	})
	return vm
}

// runSys is vm's answer to the call sys of arch name with args.
func runSys(t *testing.T, vm *bpf.VM, name, sys string, args ...uint64) uint32 {
	t.Helper()
	got, err := vm.Run(data(archFor(t, name).audit, sysNum(t, name, sys), args...))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

// sysNum is the number of the call sys on arch name.
func sysNum(t *testing.T, name, sys string) uint32 {
	t.Helper()
	n, ok := seccomp.Number(name, sys)
	if !ok {
		t.Fatalf("no %s number for %s", name, sys)
	}
	return n
}

func archFor(t *testing.T, name string) testArch {
	t.Helper()
	audit, ok := seccomp.AuditArch(name)
	if !ok {
		t.Fatalf("no audit arch for %s", name)
	}
	nr := func(s string) uint32 { return sysNum(t, name, s) }
	return testArch{audit: audit, x32: name == "amd64", connect: nr("connect"), socket: nr("socket"), socketpair: nr("socketpair")}
}

func TestProgramInVM(t *testing.T) {
	const (
		sockDgram    = 2
		sockRaw      = 3
		sockRDM      = 4
		nonblock     = 0x800
		cloexec      = 0x80000
		afInet       = 2
		afInet6      = 10
		afNetlink    = 16
		foreignI386  = 0x40000003
		foreignARM32 = 0x40000028
	)
	for _, name := range []string{"amd64", "arm64"} {
		a := archFor(t, name)
		t.Run(name, func(t *testing.T) {
			vm := vmFor(t, name, false, false)
			other := archFor(t, "arm64").audit
			if name == "arm64" {
				other = archFor(t, "amd64").audit
			}
			cases := []struct {
				name string
				in   []byte
				want uint32
			}{
				{"connect", data(a.audit, a.connect, 3, 0x7fff0000, 110), RetUserNotif},
				{"connect any args", data(a.audit, a.connect), RetUserNotif},
				{"socket unix stream", data(a.audit, a.socket, afUnix, sockStream), RetAllow},
				{"socket unix stream|nonblock|cloexec", data(a.audit, a.socket, afUnix, sockStream|nonblock|cloexec), RetAllow},
				{"socket unix seqpacket", data(a.audit, a.socket, afUnix, sockSeqpacket|cloexec), RetAllow},
				{"socket unix dgram", data(a.audit, a.socket, afUnix, sockDgram), RetErrnoEPERM},
				{"socket unix dgram|cloexec", data(a.audit, a.socket, afUnix, sockDgram|cloexec), RetErrnoEPERM},
				{"socket unix raw (becomes dgram)", data(a.audit, a.socket, afUnix, sockRaw), RetErrnoEPERM},
				{"socket unix rdm", data(a.audit, a.socket, afUnix, sockRDM), RetErrnoEPERM},
				{"socket unix dgram, junk high word", data(a.audit, a.socket, 0xffffffff00000000|afUnix, 0x1234567800000000|sockDgram), RetErrnoEPERM},
				{"socket unix stream, junk high word", data(a.audit, a.socket, 0xffffffff00000000|afUnix, 0x1234567800000000|sockStream), RetAllow},
				{"socketpair unix stream", data(a.audit, a.socketpair, afUnix, sockStream), RetAllow},
				{"socketpair unix dgram", data(a.audit, a.socketpair, afUnix, sockDgram), RetErrnoEPERM},
				{"socket inet dgram", data(a.audit, a.socket, afInet, sockDgram), RetAllow},
				{"socket inet6 stream", data(a.audit, a.socket, afInet6, sockStream), RetAllow},
				{"socket netlink raw", data(a.audit, a.socket, afNetlink, sockRaw), RetAllow},
				{"other syscall", data(a.audit, 0), RetAllow},
				{"other syscall 2", data(a.audit, 1, afUnix, sockDgram), RetAllow},
				{"foreign arch connect", data(other, a.connect), RetErrnoEPERM},
				{"i386 any", data(foreignI386, 102), RetErrnoEPERM},
				{"arm32 any", data(foreignARM32, 283), RetErrnoEPERM},
			}
			if a.x32 {
				cases = append(cases,
					struct {
						name string
						in   []byte
						want uint32
					}{"x32 connect", data(a.audit, x32SyscallBit|a.connect), RetErrnoEPERM},
					struct {
						name string
						in   []byte
						want uint32
					}{"x32 socket", data(a.audit, x32SyscallBit|a.socket, afUnix, sockDgram), RetErrnoEPERM})
			}
			for _, c := range cases {
				got, err := vm.Run(c.in)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if uint32(got) != c.want {
					t.Errorf("%s: got %#x, want %#x", c.name, got, c.want)
				}
			}
		})
	}
	if _, err := BuildProgram("riscv64"); err == nil {
		t.Error("BuildProgram(riscv64) succeeded")
	}
}

func TestUnixPath(t *testing.T) {
	mk := func(family uint16, path string, extra int) []byte {
		b := make([]byte, 2+len(path)+extra)
		binary.NativeEndian.PutUint16(b, family)
		copy(b[2:], path)
		return b
	}
	for _, c := range []struct {
		addr   []byte
		want   string
		wantOK bool
	}{
		{mk(afUnix, "/run/docker.sock", 1), "/run/docker.sock", true},
		{mk(afUnix, "/run/docker.sock", 0), "/run/docker.sock", true}, // no NUL within addrlen
		{mk(afUnix, "rel/s\x00junk", 0), "rel/s", true},
		{mk(afUnix, "\x00abstract", 0), "", false},
		{mk(afUnix, "", 0), "", false}, // unnamed
		{mk(2, "/run/docker.sock", 1), "", false},
		{[]byte{1}, "", false},
	} {
		fam := uint16(0)
		if len(c.addr) >= 2 {
			fam = binary.NativeEndian.Uint16(c.addr)
		}
		got, ok := unixPath(c.addr, fam)
		if got != c.want || ok != c.wantOK {
			t.Errorf("unixPath(%q) = %q, %v; want %q, %v", c.addr, got, ok, c.want, c.wantOK)
		}
	}
}

func TestAbstract(t *testing.T) {
	mk := func(family uint16, path string) []byte {
		b := make([]byte, 2+len(path))
		binary.NativeEndian.PutUint16(b, family)
		copy(b[2:], path)
		return b
	}
	for _, c := range []struct {
		addr []byte
		want bool
	}{
		{mk(afUnix, "\x00dbus-abc"), true},
		{mk(afUnix, "\x00"), true}, // a one-byte name, NUL
		{mk(afUnix, "\x00\x00\x00"), true},
		{mk(afUnix, ""), false}, // unnamed
		{mk(afUnix, "/run/x.sock"), false},
		{mk(afUnix, "rel\x00"), false},
		{mk(2, "\x00abc"), false},
		{[]byte{1}, false},
		{nil, false},
	} {
		fam := uint16(0)
		if len(c.addr) >= 2 {
			fam = binary.NativeEndian.Uint16(c.addr)
		}
		if got := abstract(c.addr, fam); got != c.want {
			t.Errorf("abstract(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
}

func TestInTarget(t *testing.T) {
	for in, want := range map[string]string{
		"/proc/self/fd/3":        "/proc/42/fd/3",
		"/proc/thread-self/fd/3": "/proc/42/fd/3",
		"/dev/fd/7":              "/proc/42/fd/7",
		"/proc/selfish":          "/proc/selfish",
		"/run/x.sock":            "/run/x.sock",
		"rel":                    "rel",
	} {
		if got := inTarget(in, 42); got != want {
			t.Errorf("inTarget(%q) = %q, want %q", in, got, want)
		}
	}
	_ = fmt.Sprint
}

func TestInetAddr(t *testing.T) {
	v4 := make([]byte, 16)
	binary.NativeEndian.PutUint16(v4, afInet)
	binary.BigEndian.PutUint16(v4[2:], 3128)
	copy(v4[4:], []byte{127, 0, 0, 1})
	if ap, ok := inetAddr(v4, afInet); !ok || ap.String() != "127.0.0.1:3128" {
		t.Errorf("v4: %v %v", ap, ok)
	}
	if _, ok := inetAddr(v4[:15], afInet); ok {
		t.Errorf("short sockaddr_in accepted")
	}
	v6 := make([]byte, 28)
	binary.NativeEndian.PutUint16(v6, afInet6)
	binary.BigEndian.PutUint16(v6[2:], 443)
	copy(v6[8:], netip.MustParseAddr("::ffff:10.1.2.3").AsSlice())
	if ap, ok := inetAddr(v6, afInet6); !ok || ap.String() != "10.1.2.3:443" {
		t.Errorf("mapped v6: %v %v", ap, ok)
	}
	copy(v6[8:], netip.MustParseAddr("2001:db8::1").AsSlice())
	if ap, ok := inetAddr(v6[:24], afInet6); !ok || ap.String() != "[2001:db8::1]:443" {
		t.Errorf("v6: %v %v", ap, ok)
	}
	if _, ok := inetAddr(v6[:23], afInet6); ok {
		t.Errorf("short sockaddr_in6 accepted")
	}
}
