//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetworkHostUnixSockets: --network opens the network, not the host's
// daemons. A host listener under the host's /tmp (which the sandbox's
// private /tmp hides), under $HOME and
// in the abstract namespace stays unreachable with --network, while the
// command's own pathname and abstract sockets work; a socket named in
// [sandbox_workspace_write] allow_unix_sockets is reachable, and only it.
// The sockets are world-writable, so that only the sandbox can be what
// stops the connection; each host listener counts what it accepts.
func TestNetworkHostUnixSockets(t *testing.T) {
	needPython(t)
	const own = `
import socket
srv = socket.socket(socket.AF_UNIX); srv.bind("own.sock"); srv.listen()
c = socket.socket(socket.AF_UNIX); c.connect("own.sock"); srv.accept()
srv2 = socket.socket(socket.AF_UNIX); srv2.bind("\0" + "own-" + str(id(srv))); srv2.listen()
c2 = socket.socket(socket.AF_UNIX); c2.connect("\0" + "own-" + str(id(srv))); srv2.accept()
print("own ok")
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tmpSock := filepath.Join("/tmp", randName("abtest-")+".sock")
		t.Cleanup(func() { os.Remove(tmpSock) })
		servers := map[string]*hostServer{}
		for _, p := range []string{tmpSock, filepath.Join(fx.home, "agent.sock"), "@" + randName("abtest-")} {
			s := listenUnix(t, p)
			t.Cleanup(s.stop)
			if !strings.HasPrefix(p, "@") {
				os.Chmod(p, 0o777)
				os.Lchown(p, u.uid, u.gid)
			}
			ctl := host(t, u, runOpts{}, python, "-c", unixClient, p)
			if !strings.HasPrefix(ctl.stdout, "got hello") {
				t.Fatalf("control: host cannot connect to %s either: %v", p, ctl)
			}
			servers[p] = s
		}
		listed := filepath.Join(fx.home, "agent.sock")
		cfg := filepath.Join(fx.dir, "config.toml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[sandbox_workspace_write]\nallow_unix_sockets = [%q, %q]\n", listed, tmpSock)), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, withCfg := range []bool{false, true} {
			for p, s := range servers {
				name := map[bool]string{true: "tmp", false: "home"}[p == tmpSock]
				if strings.HasPrefix(p, "@") {
					name = "abstract"
				}
				if withCfg {
					name += "/listed"
				}
				t.Run(name, func(t *testing.T) {
					args := []string{"run", "-C", fx.ws, "--network"}
					if withCfg {
						args = append(args, "--config", cfg)
					}
					s.hits.Store(0)
					r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"HOME=" + fx.home}}, append(args, "--", python, "-c", unixClient, p)...)
					want := withCfg && !strings.HasPrefix(p, "@")
					switch n := s.hits.Load(); {
					case want && (n == 0 || !strings.Contains(r.stdout, "got hello")):
						t.Errorf("--network with %s in allow_unix_sockets: not reached (%d connections): %v", p, n, r)
					case !want && (n != 0 || strings.Contains(r.stdout, "got")):
						t.Errorf("--network: host unix socket %s accepted %d connections: %v", p, n, r)
					}
				})
			}
		}
		r := runWith(t, u, runOpts{dir: fx.ws}, "run", "-C", fx.ws, "--network", "--", python, "-c", own)
		if strings.TrimSpace(r.stdout) != "own ok" {
			t.Errorf("--network: the command's own unix sockets: %v", r)
		}
	})
}
