package resident

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/resident/proto"
)

// TestStopIdleCountsOnlyUnsettled: cleanup's request finds the helper idle
// when the only other connection has settled (its command's exit is
// decided and being sent) or settles within stopIdleGrace, and busy when
// it does not. Counting every open
// connection made a cleanup run right after a served run, before the
// helper had torn that run's connection down, keep the helper.
func TestStopIdleCountsOnlyUnsettled(t *testing.T) {
	for _, c := range []struct {
		name         string
		active, busy int           // including cleanup's own connection
		endsAfter    time.Duration // the other run settles then (0: never)
		want         proto.Kind
	}{
		{"a run sending its exit", 2, 1, 0, proto.KindStopped},
		{"a run whose command runs", 2, 2, 0, proto.KindBusy},
		{"a run whose command is ending", 2, 2, 100 * time.Millisecond, proto.KindStopped},
		{"nothing else", 1, 1, 0, proto.KindStopped},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &server{sessions: map[string]*entry{}, quit: make(chan struct{}), active: c.active, busy: c.busy}
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			if c.endsAfter > 0 {
				time.AfterFunc(c.endsAfter, func() {
					s.mu.Lock()
					s.busy--
					s.mu.Unlock()
				})
			}
			s.stopIdle(fds[0])
			buf := make([]byte, 512)
			n, rfds, err := recvMsg(fds[1], buf, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := proto.Unmarshal(buf[:n], len(rfds))
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != c.want {
				t.Fatalf("reply %v, want %v", m.Kind, c.want)
			}
			select {
			case <-s.quit:
				if c.want != proto.KindStopped {
					t.Error("the helper stops with a command running")
				}
			default:
				if c.want == proto.KindStopped {
					t.Error("the helper answered Stopped but does not stop")
				}
			}
		})
	}
}
