package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxHeaderBytes bounds an HTTP request head.
const maxHeaderBytes = 64 << 10

// ServeHTTPProxy serves the HTTP proxy on ln until Close.
func (s *Server) ServeHTTPProxy(ln net.Listener) error { return s.root.ServeHTTPProxy(ln) }

// ServeHTTPProxy serves the HTTP proxy on ln until Close of the scope or
// its server.
func (sc *Scope) ServeHTTPProxy(ln net.Listener) error {
	return sc.serve(ln, func(c net.Conn) {
		// One http.Server serves each connection in turn, so request
		// parsing (net/http's, bounded by MaxHeaderBytes and the
		// header timeout) is the standard library's. The connection
		// carries its scope to the handler (ConnContext).
		one := &oneConnListener{c: c, addr: ln.Addr(), done: make(chan struct{}), scope: sc}
		sc.srv.http.Serve(one)
		// Serve returns at once, without accepting, when the server
		// is already closed; otherwise wait for the connection's end.
		if one.used {
			<-one.done
		}
	})
}

func (s *Server) newHTTPServer() *http.Server {
	tr := &http.Transport{
		// Never another proxy: the environment's proxy variables are
		// not ours to follow.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := splitTarget(addr)
			if err != nil {
				return nil, err
			}
			sc, err := scopeOf(ctx)
			if err != nil {
				return nil, err
			}
			return sc.connect(ctx, host, port)
		},
		// Each request is decided and dialed on its own.
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 0,
		ForceAttemptHTTP2:     false,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The destination is the request URI's host, never the
			// Host header: the upstream gets the same host in Host.
			u := *pr.In.URL
			pr.Out.URL = &u
			pr.Out.Host = ""
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport:  tr,
		BufferPool: copyBuffers{},
		ErrorLog:   discardLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, err)
		},
	}
	return &http.Server{
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if nc, ok := c.(*notifyConn); ok {
				return nc.scope.withRecorder(context.WithValue(ctx, scopeKey{}, nc.scope), nc.Conn)
			}
			return ctx
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodConnect {
				sc, err := scopeOf(r.Context())
				if err != nil {
					writeError(w, err)
					return
				}
				sc.handleConnect(w, r)
				return
			}
			if err := plainTarget(r); err != nil {
				http.Error(w, "agentbox proxy: "+err.Error(), http.StatusBadRequest)
				return
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: s.cfg.HandshakeTimeout,
		IdleTimeout:       s.cfg.HandshakeTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          discardLog,
	}
}

// copyBuffers are the plain-HTTP proxy's response copy buffers: 256 KiB
// rather than ReverseProxy's 32 KiB, an eighth of the reads and writes
// for a download.
type copyBuffers struct{}

var copyPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// The pool holds pointers: a slice put as an interface would allocate
// its header on every Put.
func (copyBuffers) Get() []byte { return *copyPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) {
	if cap(b) < 256<<10 {
		return // not one of ours
	}
	b = b[:256<<10]
	copyPool.Put(&b)
}

// scopeKey is the context key of the Scope a request arrived on.
type scopeKey struct{}

// scopeOf is the Scope a request's context carries. Every connection the
// HTTP server serves comes from a scope; a context without one is a bug,
// refused rather than recorded nowhere.
func scopeOf(ctx context.Context) (*Scope, error) {
	if sc, ok := ctx.Value(scopeKey{}).(*Scope); ok {
		return sc, nil
	}
	return nil, errors.New("request without a proxy scope")
}

func writeError(w http.ResponseWriter, err error) {
	var ref *Refusal
	if errors.As(err, &ref) {
		http.Error(w, "agentbox: network: "+ref.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "agentbox proxy: "+err.Error(), http.StatusBadGateway)
}

// plainTarget accepts only what a proxy client sends for plain HTTP: an
// absolute http:// URI with a host.
func plainTarget(r *http.Request) error {
	switch {
	case !r.URL.IsAbs() || r.URL.Host == "":
		return errors.New("not a proxy request: send an absolute http:// URI, or CONNECT host:port")
	case !strings.EqualFold(r.URL.Scheme, "http"):
		return fmt.Errorf("scheme %q: only http:// is forwarded; use CONNECT for others", r.URL.Scheme)
	case r.URL.User != nil:
		return errors.New("user information in the URI is not forwarded")
	}
	return nil
}

// connectTarget is the host and port of a CONNECT request, from its
// authority-form request target.
func connectTarget(r *http.Request) (string, uint16, error) {
	if r.URL == nil || r.URL.Host == "" || r.URL.Path != "" || r.URL.RawQuery != "" {
		return "", 0, errors.New("CONNECT needs host:port")
	}
	return splitTarget(r.URL.Host)
}

// splitTarget splits host:port ("[v6]:port" too); the port is required.
func splitTarget(hp string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("bad target %q: %v", hp, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || strings.HasPrefix(port, "+") {
		return "", 0, fmt.Errorf("bad port in %q", hp)
	}
	return host, uint16(n), nil
}

// TargetOf returns where the proxy would send r: for CONNECT its authority,
// for plain HTTP its absolute URI's host and port (80 by default). It never
// looks at the Host header.
func TargetOf(r *http.Request) (string, uint16, error) {
	if r.Method == http.MethodConnect {
		return connectTarget(r)
	}
	if err := plainTarget(r); err != nil {
		return "", 0, err
	}
	return urlTarget(r.URL)
}

func urlTarget(u *url.URL) (string, uint16, error) {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return splitTarget(net.JoinHostPort(u.Hostname(), port))
}

func (sc *Scope) handleConnect(w http.ResponseWriter, r *http.Request) {
	host, port, err := connectTarget(r)
	if err != nil {
		http.Error(w, "agentbox proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	up, err := sc.connect(r.Context(), host, port)
	if err != nil {
		writeError(w, err)
		return
	}
	if !sc.track(up) {
		return
	}
	defer sc.untrack(up)
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "agentbox proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// Bytes the client sent after the request head (a TLS ClientHello
	// sent eagerly) are already buffered.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	pipe(c, up)
}

// oneConnListener hands one connection to http.Server.Serve, then reports
// net.ErrClosed; done closes when the server is finished with it (the
// connection was closed or hijacked and its handler returned).
type oneConnListener struct {
	c     net.Conn
	addr  net.Addr
	done  chan struct{}
	used  bool
	scope *Scope
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if l.used {
		<-l.done
		return nil, net.ErrClosed
	}
	l.used = true
	return &notifyConn{Conn: l.c, done: l.done, scope: l.scope}, nil
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.addr }

// notifyConn closes done when it is closed; scope is the Scope it was
// accepted on.
type notifyConn struct {
	net.Conn
	done  chan struct{}
	once  sync.Once
	scope *Scope
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}
