package stage

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"

	"golang.org/x/sys/unix"
)

// The longest report a command's end can make: every destination the
// collector keeps, with the longest addresses and both reasons, and
// refusals of the longest paths, beyond what any budget carries.
func maximalReport(t *testing.T) (*unreachables, *filesSeen) {
	t.Helper()
	u := newUnreachables(&spec.Spec{Net: spec.Net{Proxy: true}})
	for i := range 2 * maxUnreachable {
		dst := netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("ffff:%04x:ffff:ffff:ffff:ffff:ffff:ffff", i)), 65535)
		u.record(0, dst, unix.ENETUNREACH)
		u.refuse(dst, policy.ReasonNotAllowed)
	}
	if n := len(u.list()); n != maxUnreachable+2 {
		t.Fatalf("%d destinations, want %d", n, maxUnreachable+2)
	}
	files := &filesSeen{rec: fsreport.NewRecorder(&fsreport.Rules{}), unavailable: strings.Repeat("u", 512)}
	for i := range fsreport.MaxDenied + 10 {
		p := fmt.Sprintf("/%d/%s", i, strings.Repeat("\n", 8192))
		files.rec.Add(fsreport.OpMetadata, p, fsreport.ReasonProtected(strings.Repeat("n", 255)))
	}
	return u, files
}

// A session command's exit answer fits one packet (spec.MaxPacket, the
// host's read buffer), and a lone run's exit frame fits spec.MaxMessage,
// whatever the command did.
func TestMaximalReportsFit(t *testing.T) {
	u, files := maximalReport(t)
	a := spec.Answer{ID: 1<<64 - 1, Exited: true, Error: strings.Repeat("e", 256), Code: 125,
		Unreachable: u.list(), Files: files.denied(maxFilesAnswer), FilesUnavailable: files.unavailable}
	if n := len(a.Append(nil)); n > spec.MaxPacket {
		t.Errorf("an exit answer of %d bytes, over spec.MaxPacket (%d)", n, spec.MaxPacket)
	}
	m := spec.Message{Exited: true, Signal: 9, Unreachable: u.list(), Files: files.denied(maxFilesMessage), FilesUnavailable: files.unavailable}
	b := m.AppendFrame(nil)
	if n := len(b) - 8; n > spec.MaxMessage {
		t.Errorf("an exit message of %d bytes, over spec.MaxMessage (%d)", n, spec.MaxMessage)
	}
	t.Logf("exit answer %d bytes (%d refusals), exit frame %d bytes (%d refusals)", len(a.Append(nil)), len(a.Files), len(b), len(m.Files))
	if len(m.Files) < 2 || len(a.Files) < 2 {
		t.Errorf("%d and %d refusals carried: the budgets carry none", len(m.Files), len(a.Files))
	}
}
