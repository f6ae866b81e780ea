package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

// BenchmarkConnection is the cost of one new connection through the
// proxy (CONNECT, SOCKS-free) and transparently, against a direct one,
// to an origin that answers one byte and closes: what the proxy adds
// per connection, without a sandbox around it.
func BenchmarkConnection(b *testing.B) {
	origin, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer origin.Close()
	go func() {
		for {
			c, err := origin.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	port := uint16(origin.Addr().(*net.TCPAddr).Port)
	rules, _ := policy.ParseAllowList([]string{"o.test"}, nil, true)
	s := New(Config{Rules: rules, Resolver: HostsResolver{"o.test": {netip.MustParseAddr("127.0.0.1")}}})
	defer s.Close()
	pl, _ := net.Listen("tcp4", "127.0.0.1:0")
	go s.ServeHTTPProxy(pl)
	names := NewFakeNames()
	fake, _ := names.Addr("o.test")
	tl, _ := net.Listen("tcp4", "127.0.0.1:0")
	go s.ServeTransparent(tl, Transparent{Names: names, OriginalDst: func(net.Conn) (netip.AddrPort, error) {
		return netip.AddrPortFrom(fake, port), nil
	}})
	read := func(c net.Conn) {
		if _, err := io.ReadAll(c); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp4", origin.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			read(c)
		}
	})
	b.Run("connect", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp4", pl.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT o.test:%d HTTP/1.1\r\nHost: o.test\r\n\r\n", port)
			br := bufio.NewReader(c)
			line, _ := br.ReadString('\n')
			if !strings.Contains(line, "200") {
				b.Fatal(line)
			}
			for {
				l, _ := br.ReadString('\n')
				if l == "\r\n" || l == "" {
					break
				}
			}
			io.ReadAll(br)
			c.Close()
		}
	})
	b.Run("transparent", func(b *testing.B) {
		for b.Loop() {
			c, err := net.Dial("tcp4", tl.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			read(c)
		}
	})
}
