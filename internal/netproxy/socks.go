package netproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 constants (RFC 1928).
const (
	socksVersion   = 5
	methodNoAuth   = 0x00
	methodNone     = 0xff
	cmdConnect     = 0x01
	atypIPv4       = 0x01
	atypDomain     = 0x03
	atypIPv6       = 0x04
	repSucceeded   = 0x00
	repFailure     = 0x01
	repNotAllowed  = 0x02
	repHostUnreach = 0x04
	repCmdNotSupp  = 0x07
	repAtypNotSupp = 0x08
)

// socksRequest is a parsed SOCKS5 request.
type socksRequest struct {
	Cmd  byte
	Atyp byte
	// Host is the domain name exactly as sent (any bytes, NUL included:
	// the policy judges it), or the address in text form.
	Host string
	Port uint16
}

// errSocks carries the reply code for a malformed or unsupported request.
type errSocks struct {
	rep byte
	msg string
}

func (e *errSocks) Error() string { return "socks5: " + e.msg }

// readGreeting reads the client's method list and reports whether it
// offers "no authentication", the only method served.
func readGreeting(r io.Reader) (bool, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return false, err
	}
	if h[0] != socksVersion {
		return false, &errSocks{repFailure, fmt.Sprintf("version %d, not 5", h[0])}
	}
	if h[1] == 0 {
		return false, &errSocks{repFailure, "no authentication methods offered"}
	}
	methods := make([]byte, h[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return false, err
	}
	for _, m := range methods {
		if m == methodNoAuth {
			return true, nil
		}
	}
	return false, nil
}

// readRequest reads one SOCKS5 request. It reads exactly the bytes the
// request is made of, so nothing the client sends after it is lost.
func readRequest(r io.Reader) (socksRequest, error) {
	var req socksRequest
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return req, err
	}
	if h[0] != socksVersion {
		return req, &errSocks{repFailure, fmt.Sprintf("request version %d, not 5", h[0])}
	}
	if h[2] != 0 {
		return req, &errSocks{repFailure, "reserved byte not zero"}
	}
	req.Cmd, req.Atyp = h[1], h[3]
	switch req.Atyp {
	case atypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return req, err
		}
		req.Host = netip.AddrFrom4(a).String()
	case atypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return req, err
		}
		req.Host = netip.AddrFrom16(a).String()
	case atypDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return req, err
		}
		if n[0] == 0 {
			return req, &errSocks{repHostUnreach, "empty domain name"}
		}
		b := make([]byte, n[0])
		if _, err := io.ReadFull(r, b); err != nil {
			return req, err
		}
		req.Host = string(b)
	default:
		return req, &errSocks{repAtypNotSupp, fmt.Sprintf("address type %d", req.Atyp)}
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return req, err
	}
	req.Port = binary.BigEndian.Uint16(p[:])
	if req.Cmd != cmdConnect {
		return req, &errSocks{repCmdNotSupp, fmt.Sprintf("command %d (only CONNECT is served)", req.Cmd)}
	}
	return req, nil
}

// socksReply is a reply with a zero bound address: clients do not need
// ours, and it would name the host side of the proxy.
func socksReply(rep byte) []byte {
	return []byte{socksVersion, rep, 0, atypIPv4, 0, 0, 0, 0, 0, 0}
}

// ServeSOCKS serves the SOCKS5 proxy on ln until Close.
func (s *Server) ServeSOCKS(ln net.Listener) error { return s.root.ServeSOCKS(ln) }

// ServeSOCKS serves the SOCKS5 proxy on ln until Close of the scope or its
// server.
func (sc *Scope) ServeSOCKS(ln net.Listener) error {
	return sc.serve(ln, sc.handleSOCKS)
}

func (sc *Scope) handleSOCKS(c net.Conn) {
	s := sc.srv
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	br := bufio.NewReaderSize(c, 512)
	ok, err := readGreeting(br)
	if err != nil {
		return
	}
	if !ok {
		c.Write([]byte{socksVersion, methodNone})
		return
	}
	if _, err := c.Write([]byte{socksVersion, methodNoAuth}); err != nil {
		return
	}
	req, err := readRequest(br)
	if err != nil {
		var se *errSocks
		if errors.As(err, &se) {
			c.Write(socksReply(se.rep))
		}
		return
	}
	up, err := sc.connect(sc.withRecorder(sc.ctx, c), req.Host, req.Port)
	if err != nil {
		rep := byte(repHostUnreach)
		var ref *Refusal
		if errors.As(err, &ref) {
			rep = repNotAllowed
		}
		c.Write(socksReply(rep))
		return
	}
	if !sc.track(up) {
		return
	}
	defer sc.untrack(up)
	defer up.Close()
	if _, err := c.Write(socksReply(repSucceeded)); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	pipe(c, up)
}
