package netproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Transparent configures [Server.ServeTransparent].
type Transparent struct {
	// Names maps the fake addresses the sandbox's name server gave
	// back to their names. Required.
	Names *FakeNames
	// OriginalDst is the destination a connection accepted on the
	// transparent listener was made to; nil means the platform's
	// (SO_ORIGINAL_DST on Linux).
	OriginalDst func(net.Conn) (netip.AddrPort, error)
	// RecorderFor, when set, chooses the recorder of a connection by
	// its client address (a session tells its commands apart by their
	// sockets' ports). It may be asked more than once for a short
	// while: the command's connect supervisor learns the port when the
	// command's connect returns, which may be after the accept. A nil
	// result records in the scope's recorder.
	RecorderFor func(client net.Addr) *Recorder
}

// ReasonUnknownFake is the refusal of a connection to a fake address
// (FakePrefix, FakePrefix6) that the sandbox's name server
// never gave.
const ReasonUnknownFake = "fake address never given out"

// ServeTransparent carries the connections a sandbox's packet filter
// redirected to ln (transparent networking, Linux): each goes to its
// original destination, a fake address standing for its name, through
// the same decision, look-up, admission and dial as a proxy request.
func (s *Server) ServeTransparent(ln net.Listener, t Transparent) error {
	return s.root.ServeTransparent(ln, t)
}

// ServeTransparent is Server.ServeTransparent in the scope.
func (sc *Scope) ServeTransparent(ln net.Listener, t Transparent) error {
	if t.OriginalDst == nil {
		t.OriginalDst = originalDst
	}
	sc.srv.mu.Lock()
	sc.srv.fake = t.Names
	sc.srv.mu.Unlock()
	return sc.serve(ln, func(c net.Conn) { sc.handleTransparent(c, t) })
}

// recorderWait bounds how long a transparent connection waits for its
// command to be known (Transparent.RecorderFor).
const recorderWait = 200 * time.Millisecond

func (sc *Scope) handleTransparent(c net.Conn, t Transparent) {
	dst, err := t.OriginalDst(c)
	rec := sc.rec
	if t.RecorderFor != nil {
		for deadline := time.Now().Add(recorderWait); ; {
			if r := t.RecorderFor(c.RemoteAddr()); r != nil {
				rec = r
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err != nil {
		// Not redirected: a connection made to the listener itself.
		host, port := "127.0.0.1", uint16(0)
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
			host, port = a.IP.String(), uint16(a.Port)
		}
		rec.Deny(host, port, "not a redirected connection (agentbox's own listener)")
		reset(c)
		return
	}
	host := dst.Addr().Unmap().String()
	if IsFake(dst.Addr()) {
		name, ok := t.Names.Name(dst.Addr())
		if !ok {
			rec.Deny(host, dst.Port(), ReasonUnknownFake)
			reset(c)
			return
		}
		host = name
	}
	ctx := context.WithValue(sc.ctx, recorderKey{}, rec)
	up, err := sc.connect(ctx, host, dst.Port())
	if err != nil {
		reset(c)
		return
	}
	if !sc.track(up) {
		return
	}
	defer sc.untrack(up)
	defer up.Close()
	pipe(c, up)
}

// fakeName is the name a fake address in host stands for, when the
// server carries a sandbox's transparent connections.
func (s *Server) fakeName(host string) (string, bool) {
	s.mu.Lock()
	f := s.fake
	s.mu.Unlock()
	if f == nil {
		return "", false
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil || !IsFake(a) {
		return "", false
	}
	return f.Name(a)
}

// recorderKey is the context key of a recorder chosen by the caller of
// connect, which wins over Config.RecorderFor.
type recorderKey struct{}

// reset closes c with a reset rather than an orderly end, so that the
// client sees its connection refused rather than an empty reply.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

var errNotRedirected = errors.New("not a redirected connection")
