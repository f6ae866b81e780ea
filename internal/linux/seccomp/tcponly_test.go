package seccomp

import (
	"fmt"
	"testing"
)

// TestTCPOnlyInVM: allow-listed egress without a network namespace keeps
// sockets to unix and TCP, and refuses every way to send without a
// checked connect.
func TestTCPOnlyInVM(t *testing.T) {
	const (
		sockDgram, sockRaw, sockSeqpacket = 2, 3, 5
		sockNonblockCloexec               = 0x80800
		ipprotoUDP, ipprotoSCTP           = 17, 132
		ipprotoMPTCP                      = 262
		afNetlinkV, afVsock               = 16, 40
	)
	for _, archName := range []string{"amd64", "arm64"} {
		t.Run(archName, func(t *testing.T) {
			prog, err := BuildProgram(Options{Arch: archName, TCPOnly: true, DenyInetSockets: true, RestrictSocketFamilies: true, DenyIPC: true})
			if err != nil {
				t.Fatal(err)
			}
			info := arches[archName]
			cases := []struct {
				sys  string
				args [6]uint64
				want Action
			}{
				{"socket", [6]uint64{afInet, sockStream}, ActAllow},
				{"socket", [6]uint64{afInet, sockStream | sockNonblockCloexec, ipprotoTCP}, ActAllow},
				{"socket", [6]uint64{afInet6, sockStream, 0}, ActAllow},
				{"socket", [6]uint64{afUnix, sockDgram}, ActAllow}, // unix datagrams: connect mediation's business
				{"socket", [6]uint64{afUnix, sockStream}, ActAllow},
				{"socket", [6]uint64{afInet, sockDgram}, ActEPERM},
				{"socket", [6]uint64{afInet6, sockDgram | sockNonblockCloexec, ipprotoUDP}, ActEPERM},
				{"socket", [6]uint64{afInet, sockRaw, 1}, ActEPERM},
				{"socket", [6]uint64{afInet, sockSeqpacket, ipprotoSCTP}, ActEPERM},
				{"socket", [6]uint64{afInet, sockStream, ipprotoSCTP}, ActEPERM},
				{"socket", [6]uint64{afInet, sockStream, ipprotoMPTCP}, ActEPERM},
				{"socket", [6]uint64{afNetlinkV, sockRaw}, ActEPERM},
				{"socket", [6]uint64{afVsock, sockStream}, ActEPERM},
				{"socket", [6]uint64{1<<32 | afInet, sockDgram}, ActEPERM},
				{"socketpair", [6]uint64{afUnix, sockStream}, ActAllow},
				{"socketpair", [6]uint64{afInet, sockStream}, ActEPERM},
				{"sendto", [6]uint64{3, 0, 10, 0}, ActAllow},
				{"sendto", [6]uint64{3, 0, 10, msgFastOpen}, ActEPERM},
				{"sendmsg", [6]uint64{3, 0, 0}, ActAllow},
				{"sendmsg", [6]uint64{3, 0, msgFastOpen | 0x40}, ActEPERM},
				{"sendmmsg", [6]uint64{3, 0, 1, msgFastOpen}, ActEPERM},
				{"listen", [6]uint64{3, 128}, ActEPERM},
				{"connect", [6]uint64{3, 0, 16}, ActAllow}, // decided by the connect supervisor
			}
			for _, c := range cases {
				nr, ok := info.nr[c.sys]
				if !ok {
					t.Fatalf("no number for %s", c.sys)
				}
				if got := run(t, prog, seccompData(info.auditArch, nr, c.args)); got != c.want {
					t.Errorf("%s%s: got %v, want %v", c.sys, fmt.Sprint(c.args[:3]), got, c.want)
				}
			}
			if t.Failed() {
				t.Logf("program:\n%s", disassemble(prog))
			}
		})
	}
}
