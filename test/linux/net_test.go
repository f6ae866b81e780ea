//go:build linux

package linux

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostServer listens in the test process and counts what arrives.
type hostServer struct {
	hits atomic.Int64
	addr string
	stop func()
}

func listenTCP(t *testing.T) *hostServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return acceptLoop(t, ln, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
}

func listenUnix(t *testing.T, name string) *hostServer {
	t.Helper()
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	return acceptLoop(t, ln, name)
}

func acceptLoop(t *testing.T, ln net.Listener, addr string) *hostServer {
	s := &hostServer{addr: addr, stop: func() { ln.Close() }}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.hits.Add(1)
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func listenUDP(t *testing.T) *hostServer {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hostServer{addr: fmt.Sprint(pc.LocalAddr().(*net.UDPAddr).Port), stop: func() { pc.Close() }}
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			s.hits.Add(1)
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// Client scripts. bash's /dev/tcp and /dev/udp need no extra tools; unix
// sockets need python3.
const (
	tcpClient  = `exec 3<>/dev/tcp/127.0.0.1/$PORT && read -r line <&3 && echo "got $line"`
	udpClient  = `for i in 1 2 3 4 5; do echo ping > /dev/udp/127.0.0.1/$PORT; sleep 0.02; done; echo sent`
	unixClient = `
import socket, sys
a = sys.argv[1]
if a.startswith("@"):
    a = "\0" + a[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(a)
    print("got", s.recv(16).decode().strip())
except OSError as e:
    print("refused", e)
`
)

// TestNetwork: servers on the host's loopback (TCP, UDP) are unreachable
// offline and reachable with --network; a host abstract unix socket is
// unreachable either way. What the
// assertion rests on is whether the host server saw anything.
func TestNetwork(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no bash")
	}
	type probe struct {
		name   string
		listen func(t *testing.T) *hostServer
		argv   func(s *hostServer) []string
		python bool
		// offlineOnly: unreachable with --network too (host daemons
		// are not network; see TestNetworkHostUnixSockets).
		offlineOnly bool
	}
	probes := []probe{
		{"tcp", listenTCP, func(s *hostServer) []string {
			return []string{"/bin/bash", "-c", strings.ReplaceAll(tcpClient, "$PORT", s.addr)}
		}, false, false},
		{"udp", listenUDP, func(s *hostServer) []string {
			return []string{"/bin/bash", "-c", strings.ReplaceAll(udpClient, "$PORT", s.addr)}
		}, false, false},
		{"abstract-unix", func(t *testing.T) *hostServer { return listenUnix(t, "@"+randName("abtest-")) },
			func(s *hostServer) []string { return []string{python, "-c", unixClient, s.addr} }, true, true},
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		for _, p := range probes {
			for _, online := range []bool{false, true} {
				name := p.name + "/offline"
				if online {
					name = p.name + "/--network"
				}
				t.Run(name, func(t *testing.T) {
					if p.python {
						needPython(t)
					}
					s := p.listen(t)
					args := []string{"run", "-C", fx.ws}
					if online {
						args = append(args, "--network")
					}
					r := runWith(t, u, runOpts{dir: fx.ws}, append(append(args, "--"), p.argv(s)...)...)
					time.Sleep(200 * time.Millisecond) // let datagrams land
					hits := s.hits.Load()
					switch {
					case online && !p.offlineOnly && hits == 0:
						t.Errorf("--network: host %s server saw nothing: %v", p.name, r)
					case online && p.offlineOnly && hits != 0:
						t.Errorf("--network: host %s server received %d connections: %v", p.name, hits, r)
					case !online && hits != 0:
						t.Errorf("offline: host %s server received %d connections/datagrams: %v", p.name, hits, r)
					}
					if r.code == 125 {
						t.Errorf("agentbox failed: %v", r)
					}
				})
			}
		}
	})
}

// TestNetworkInside: offline, loopback inside the sandbox still works for a
// server and client both started in it, and so does a unix socket in the
// workspace.
func TestNetworkInside(t *testing.T) {
	needPython(t)
	const server = `
import os, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(1)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.settimeout(10)
a, _ = s.accept()
a.sendall(b"pong\n")
`
	const unixSock = `
import socket, sys
p = sys.argv[1]
l = socket.socket(socket.AF_UNIX)
l.bind(p)
l.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect(p)
a, _ = l.accept()
a.sendall(b"upong")
print(c.recv(5).decode())
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		t.Run("tcp-loopback", func(t *testing.T) {
			r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"PY=" + python, "SRV=" + server}}, "run", "-C", fx.ws, "--", "/bin/bash", "-c", `
"$PY" -c "$SRV" "$PWD/port" &
for i in $(seq 100); do [ -s port ] && break; sleep 0.05; done
exec 3<>/dev/tcp/127.0.0.1/$(cat port) && read -r line <&3 && echo "got $line"
wait`)
			if !strings.Contains(r.stdout, "got pong") {
				t.Errorf("loopback server inside the sandbox unreachable: %v", r)
			}
			if !exists(filepath.Join(fx.ws, "port")) {
				t.Errorf("host: server's port file missing from the workspace")
			}
		})
		t.Run("unix-in-workspace", func(t *testing.T) {
			sock := filepath.Join(fx.ws, "s.sock")
			r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", python, "-c", unixSock, sock)
			if strings.TrimSpace(r.stdout) != "upong" {
				t.Errorf("unix socket in the workspace: %v", r)
			}
			if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("host: %s is not a socket: %v %v", sock, fi, err)
			}
		})
	})
}

// TestHostUnixSockets: offline, a host daemon's unix socket (under /run,
// and under $HOME, such as an ssh-agent) is unreachable. The socket is
// world-writable so that only the sandbox can be what stops the connection.
func TestHostUnixSockets(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		var paths []string
		if os.Geteuid() == 0 {
			paths = append(paths, filepath.Join("/run", randName("abtest-")+".sock"))
		}
		paths = append(paths, filepath.Join(fx.home, "agent.sock"))
		// /tmp is a writable root, but a host daemon's socket there (an
		// ssh agent, X11, tmux) must stay out of reach all the same.
		tmpSock := filepath.Join("/tmp", randName("abtest-")+".sock")
		paths = append(paths, tmpSock)
		defer os.Remove(tmpSock)
		for _, p := range paths {
			t.Run(strings.TrimPrefix(filepath.Dir(p), "/"), func(t *testing.T) {
				s := listenUnix(t, p)
				os.Chmod(p, 0o777)
				os.Lchown(p, u.uid, u.gid)
				ctl := host(t, u, runOpts{}, python, "-c", unixClient, p)
				if !strings.HasPrefix(ctl.stdout, "got hello") {
					t.Fatalf("control: host cannot connect either: %v", ctl)
				}
				s.hits.Store(0)
				r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"HOME=" + fx.home}}, "run", "-C", fx.ws, "--", python, "-c", unixClient, p)
				if n := s.hits.Load(); n != 0 || strings.Contains(r.stdout, "got") {
					t.Errorf("offline: host unix socket %s accepted %d connections: %v", p, n, r)
				}
			})
		}
	})
}

// TestExoticSocketFamilies: vsock is not isolated by network namespaces
// (on a VM it reaches the hypervisor), so offline runs refuse every family
// but unix, inet, inet6 and netlink; --network leaves them alone.
func TestExoticSocketFamilies(t *testing.T) {
	needPython(t)
	probe := `import socket
for name in ("AF_VSOCK", "AF_INET", "AF_NETLINK"):
    fam = getattr(socket, name)
    typ = socket.SOCK_DGRAM if name == "AF_NETLINK" else socket.SOCK_STREAM
    try:
        socket.socket(fam, typ).close(); print(name, "ok")
    except OSError as e:
        print(name, "errno", e.errno)
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		ctl := host(t, u, runOpts{}, python, "-c", probe)
		if !strings.Contains(ctl.stdout, "AF_VSOCK ok") {
			t.Skipf("this kernel has no vsock (control run: %q): nothing to refuse", ctl.stdout)
		}
		r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--", python, "-c", probe)
		if !strings.Contains(r.stdout, "AF_VSOCK errno 1") || !strings.Contains(r.stdout, "AF_INET ok") || !strings.Contains(r.stdout, "AF_NETLINK ok") {
			t.Errorf("offline: want vsock refused (EPERM), inet and netlink allowed: %v", r)
		}
	})
}
