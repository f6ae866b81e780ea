package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbox/agentbox/internal/rawpolicy"
	"github.com/agentbox/agentbox/policy"
)

// TestCmdReport: the library exposes the run report on the finished
// command: the allowed request and the refused one, as the proxy saw them.
func TestCmdReport(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.2 good.test evil.test\n"), 0o644)
	t.Setenv(testHostsEnv, hosts)

	ws, _ := filepath.EvalSymlinks(t.TempDir())
	pol, err := rawpolicy.Resolve(policy.Options{Cwd: ws, AllowDomains: []string{"good.test", "127.0.0.2"}},
		func(string) string { return "" }, "linux")
	if err != nil {
		t.Fatal(err)
	}
	c := Command(pol, "sh", "-c", fmt.Sprintf("%[1]s -fsS http://good.test:%[2]d/; %[1]s -fsS http://evil.test:%[2]d/; exit 0", curl, port))
	out, err := c.Output()
	if err != nil || string(out) != "ok" {
		t.Fatalf("output %q, %v", out, err)
	}
	r := c.Report
	if r == nil || r.ExitCode != 0 || r.Network.Mode != NetworkAllowList {
		t.Fatalf("report %+v", r)
	}
	if len(r.Network.Allowed) != 1 || r.Network.Allowed[0] != (NetworkAllowed{"good.test", uint16(port), 1}) {
		t.Errorf("allowed %+v", r.Network.Allowed)
	}
	if len(r.Network.Denied) != 1 || r.Network.Denied[0].Host != "evil.test" || r.Network.Denied[0].Reason != "not in allowed_domains" {
		t.Errorf("denied %+v", r.Network.Denied)
	}
	var b strings.Builder
	r.WriteRefusals(&b)
	if want := fmt.Sprintf("agentbox: network: refused evil.test:%d (not in allowed_domains)\n", port); b.String() != want {
		t.Errorf("refusals %q, want %q", b.String(), want)
	}
	if hits.Load() != 1 {
		t.Errorf("server saw %d requests, want 1", hits.Load())
	}
}
