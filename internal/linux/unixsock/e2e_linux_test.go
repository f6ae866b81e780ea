package unixsock

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// client tries each socket named on its command line and prints one
// "path errno-or-ok" line each, then serves and dials a socket of its
// own in its working directory.
const client = `
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); s.sendall(b"ping\n"); r = s.recv(5)
        print(p, "ok" if r == b"ping\n" else "bad-echo")
    except OSError as e:
        print(p, e.errno)
srv = socket.socket(socket.AF_UNIX); srv.bind("own.sock"); srv.listen()
c = socket.socket(socket.AF_UNIX); c.connect("own.sock"); a, _ = srv.accept()
c.sendall(b"x"); print("own", "ok" if a.recv(1) == b"x" else "bad")
`

// TestEndToEnd builds agentbox and checks, from outside the sandbox, that
// daemons listening under /run and under $HOME are unreachable with the
// network off and with --network, and reachable when allow_unix_sockets
// lists them, while a socket the command creates in its workspace works.
// It runs as the current user and, when that is root, as nobody too.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentbox")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	if _, err := os.Stat("/run"); err != nil {
		t.Skip("needs /run")
	}
	modRoot, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	os.Chmod(binDir, 0o755)
	os.Chmod(filepath.Dir(binDir), 0o755) // t.TempDir's parent is 0700
	bin := filepath.Join(binDir, "agentbox")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentbox")
	build.Dir = filepath.Dir(strings.TrimSpace(string(modRoot)))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	users := []struct {
		name     string
		uid, gid uint32
	}{{"self", uint32(os.Getuid()), uint32(os.Getgid())}}
	if os.Getuid() == 0 {
		users = append(users, struct {
			name     string
			uid, gid uint32
		}{"nobody", 65534, 65534})
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			// A home outside every writable root (/tmp is one).
			home, err := os.UserHomeDir()
			if u.name != "self" || err != nil {
				home = filepath.Join("/run", "agentbox-test-home-"+randHex())
				if err := os.Mkdir(home, 0o755); err != nil {
					t.Skipf("cannot make a home under /run: %v", err)
				}
				t.Cleanup(func() { os.RemoveAll(home) })
				os.Chown(home, int(u.uid), int(u.gid))
			}
			var nRun, nHome atomic.Int32
			runSock := listen(t, filepath.Join("/run", "agentbox-test-"+randHex()+".sock"), &nRun)
			homeSock := listen(t, filepath.Join(home, "agentbox-test-"+randHex()+".sock"), &nHome)
			ws := t.TempDir()
			os.Chmod(filepath.Dir(ws), 0o755)
			os.Chown(ws, int(u.uid), int(u.gid))

			cfgDir := t.TempDir()
			os.Chmod(cfgDir, 0o755)
			cfg := filepath.Join(cfgDir, "config.toml")
			if err := os.WriteFile(cfg, []byte("[sandbox_workspace_write]\nallow_unix_sockets = [\""+runSock+"\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(network bool, extra ...string) map[string]string {
				args := append([]string{"run", "-C", ws}, extra...)
				if network {
					args = append(args, "--network")
				}
				args = append(args, "--", "python3", "-c", client, runSock, homeSock)
				cmd := exec.Command(bin, args...)
				cmd.Dir = ws
				cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home}
				if u.name != "self" {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
				}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("agentbox %v: %v\n%s", args[:len(args)-4], err, out)
				}
				os.Remove(filepath.Join(ws, "own.sock"))
				res := map[string]string{}
				for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					if k, v, ok := strings.Cut(line, " "); ok {
						res[k] = v
					}
				}
				return res
			}

			off := run(false)
			const eacces = "13"
			if off[runSock] != eacces || off[homeSock] != eacces || off["own"] != "ok" {
				t.Errorf("network off: got %v, want %s and %s refused (%s) and own ok", off, runSock, homeSock, eacces)
			}
			if nRun.Load() != 0 || nHome.Load() != 0 {
				t.Errorf("network off: daemons saw %d (/run) and %d ($HOME) connections", nRun.Load(), nHome.Load())
			}
			// Opening the network does not open the host's daemons.
			on := run(true)
			if on[runSock] != eacces || on[homeSock] != eacces || on["own"] != "ok" {
				t.Errorf("--network: got %v, want %s and %s refused (%s) and own ok", on, runSock, homeSock, eacces)
			}
			if nRun.Load() != 0 || nHome.Load() != 0 {
				t.Errorf("--network: daemons saw %d (/run) and %d ($HOME) connections", nRun.Load(), nHome.Load())
			}
			// allow_unix_sockets does, for the daemon it names only.
			listed := run(true, "--config", cfg)
			if listed[runSock] != "ok" || listed[homeSock] != eacces || listed["own"] != "ok" {
				t.Errorf("--network, %s listed: got %v, want it ok, %s refused and own ok", runSock, listed, homeSock)
			}
		})
	}
}

func randHex() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// listen starts an echo daemon on path, reachable by anyone, counting
// the connections it accepts.
func listen(t *testing.T, path string, n *atomic.Int32) string {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", path, err)
	}
	t.Cleanup(func() { ln.Close(); os.Remove(path) })
	os.Chmod(path, 0o666)
	go serveEcho(ln, n)
	return path
}
