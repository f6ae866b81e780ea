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

// BenchmarkTunnel is a 64 MiB download through a CONNECT tunnel, and
// directly, from an origin on loopback (b.SetBytes: MB/s).
func BenchmarkTunnel(b *testing.B) {
	const size = 64 << 20
	origin, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer origin.Close()
	chunk := make([]byte, 256<<10)
	go func() {
		for {
			c, err := origin.Accept()
			if err != nil {
				return
			}
			go func() {
				for n := 0; n < size; n += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	port := uint16(origin.Addr().(*net.TCPAddr).Port)
	rules, _ := policy.ParseAllowList([]string{"o.test"}, nil, true)
	s := New(Config{Rules: rules, Resolver: HostsResolver{"o.test": {netip.MustParseAddr("127.0.0.1")}}})
	defer s.Close()
	pl, _ := net.Listen("tcp4", "127.0.0.1:0")
	go s.ServeHTTPProxy(pl)
	buf := make([]byte, 256<<10)
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := net.Dial("tcp4", origin.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, buf)
			c.Close()
		}
	})
	b.Run("connect", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := net.Dial("tcp4", pl.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT o.test:%d HTTP/1.1\r\nHost: o.test\r\n\r\n", port)
			br := bufio.NewReaderSize(c, 256<<10)
			if line, _ := br.ReadString('\n'); !strings.Contains(line, " 200 ") {
				b.Fatal(line)
			}
			for {
				if l, _ := br.ReadString('\n'); l == "\r\n" || l == "" {
					break
				}
			}
			n, _ := io.CopyBuffer(io.Discard, struct{ io.Reader }{br}, buf)
			if n != size {
				b.Fatalf("got %d bytes", n)
			}
			c.Close()
		}
	})
}
