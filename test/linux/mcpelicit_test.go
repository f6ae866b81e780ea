//go:build linux

package linux

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/mcpserver/wiretest"
)

// elicitation reads the next message of w and checks it is an
// elicitation/create whose message names every item.
func (w *mcpWire) elicitation(items ...string) wiretest.Reply {
	w.t.Helper()
	r := w.read()
	var p struct {
		Message string `json:"message"`
	}
	if r.Method != "elicitation/create" || json.Unmarshal(r.Params, &p) != nil {
		w.t.Fatalf("want an elicitation/create, got %v", r)
	}
	for _, it := range items {
		if !strings.Contains(p.Message, it) {
			w.t.Errorf("the question does not name %q: %q", it, p.Message)
		}
	}
	return r
}

// result reads the next message of w: the run result of call id.
func (w *mcpWire) result(id int) wiretest.RunResult {
	w.t.Helper()
	r := w.read()
	out, err := r.Run()
	if err != nil || string(r.ID) != fmt.Sprint(id) {
		w.t.Fatalf("want the result of call %d: %v (%v)", id, r, err)
	}
	return out
}

func askCall(id int, script string, req map[string]any) string {
	a := map[string]any{"command": []string{"/bin/sh", "-c", script}}
	if req != nil {
		a["request_permissions"] = req
	}
	return wiretest.Call(id, a)
}

// TestMCPElicit: through the real `agentbox mcp`, as root and as a plain
// user, a request_permissions the user accepts once makes exactly the
// asked directory writable for exactly that call (its .git stays
// read-only), the next call is refused the write; a decline, a home or /
// asked for, and a client without the elicitation capability run nothing
// and return 125; a session grant lasts. Every write is checked on the
// host.
func TestMCPElicit(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		w := startWireWith(t, u, fx, `{"elicitation":{}}`)
		add := map[string]any{"add_dirs": []string{fx.add}, "reason": "write the release notes"}

		w.send(askCall(1, `echo granted > "$ADD/granted.txt" && { echo x > "$ADD/.git/config"; true; }`, add))
		w.send(wiretest.Answer(w.elicitation(fx.add, "write the release notes"), map[string]any{"action": "accept", "content": map[string]any{"scope": "once"}}))
		if r := w.result(1); r.ExitCode != 0 {
			t.Errorf("accepted once: %+v", r)
		}
		assertContent(t, fx.add+"/granted.txt", "granted\n")
		assertContent(t, fx.add+"/.git/config", fx.gitConfig)

		w.send(askCall(2, `echo later > "$ADD/later.txt"`, nil))
		if r := w.result(2); r.ExitCode == 0 {
			t.Errorf("the call after a once grant: %+v", r)
		}
		assertAbsent(t, fx.add+"/later.txt")

		w.send(askCall(3, `touch "$WS/declined" "$ADD/declined"`, add))
		w.send(wiretest.Answer(w.elicitation(fx.add), map[string]any{"action": "decline"}))
		if r := w.result(3); r.ExitCode != 125 || !strings.Contains(r.Stderr, "declined") || !strings.Contains(r.Stderr, "--add-dir "+fx.add) {
			t.Errorf("declined: %+v", r)
		}
		assertAbsent(t, fx.ws+"/declined")
		assertAbsent(t, fx.add+"/declined")

		// Refused without asking: the next message is the result.
		for i, d := range []string{fx.home, "/", "/etc", "add"} {
			w.send(askCall(4+i, `touch "$WS/unhonourable"`, map[string]any{"add_dirs": []string{d}}))
			if r := w.result(4 + i); r.ExitCode != 125 || !strings.Contains(r.Stderr, "cannot grant") {
				t.Errorf("%s: %+v", d, r)
			}
		}
		assertAbsent(t, fx.ws+"/unhonourable")

		w.send(askCall(10, `touch "$ADD/s1"`, add))
		w.send(wiretest.Answer(w.elicitation(fx.add), map[string]any{"action": "accept", "content": map[string]any{"scope": "session"}}))
		if r := w.result(10); r.ExitCode != 0 {
			t.Errorf("accepted for the session: %+v", r)
		}
		w.send(askCall(11, `touch "$ADD/s2"`, nil))
		if r := w.result(11); r.ExitCode != 0 {
			t.Errorf("a later call of the session: %+v", r)
		}
		for _, n := range []string{"s1", "s2"} {
			if !exists(fx.add + "/" + n) {
				t.Errorf("%s not written on the host", n)
			}
		}

		// A client that cannot ask its user.
		plain := startWire(t, u, fx)
		plain.send(askCall(1, `touch "$WS/nocap" "$ADD/nocap"`, add))
		if r := plain.result(1); r.ExitCode != 125 || !strings.Contains(r.Stderr, "elicitation capability") {
			t.Errorf("no capability: %+v", r)
		}
		assertAbsent(t, fx.ws+"/nocap")
		assertAbsent(t, fx.add+"/nocap")
	})
}

// TestMCPElicitDomain: through the real `agentbox mcp`, with the network
// off, a refused fetch's report suggests the host; asked for and accepted
// once, the next call reaches it through agentbox's proxy, and the one
// after is refused again; the server on the host counts the requests.
func TestMCPElicitDomain(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		web := listenWeb(t, "127.0.0.2", "granted")
		hosts := filepath.Join(fx.dir, "hosts")
		if err := os.WriteFile(hosts, []byte("127.0.0.2 granted.test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := startWireWith(t, u, fx, `{"elicitation":{}}`, "AGENTBOX_TEST_HOSTS="+hosts)
		get := curl + " -fsS --max-time 20 " + web.at("granted.test")
		w.send(askCall(1, get, nil))
		r := w.result(1)
		var rep runReport
		json.Unmarshal(r.Report, &rep)
		want := fmt.Sprintf("granted.test:%d", web.port)
		if r.ExitCode == 0 || rep.Suggest == nil || !slices.Contains(rep.Suggest.AllowDomains, want) {
			t.Errorf("refused fetch: %+v, want a report suggesting %s", r, want)
		}
		w.send(askCall(2, get, map[string]any{"allow_domains": []string{want, "127.0.0.2"}, "reason": "fetch the page"}))
		w.send(wiretest.Answer(w.elicitation(want, "127.0.0.2", "fetch the page"), map[string]any{"action": "accept", "content": map[string]any{"scope": "once"}}))
		if r := w.result(2); r.ExitCode != 0 || r.Stdout != "granted-ok\n" {
			t.Errorf("granted fetch: %+v", r)
		}
		w.send(askCall(3, get, nil))
		if r := w.result(3); r.ExitCode == 0 {
			t.Errorf("the fetch after a once grant: %+v", r)
		}
		if n := web.hits.Load(); n != 1 {
			t.Errorf("the host's server saw %d requests, want 1", n)
		}
	})
}
