package acl

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// The hidden scene: the profile's .ssh (a private key, a public key
// re-opened), a .netrc, and a .env in the workspace.
const (
	ssh      = profile + `\.ssh`
	sshKey   = ssh + `\id_ed25519`
	sshPub   = ssh + `\id_ed25519.pub`
	netrc    = profile + `\.netrc`
	dotenv   = proj + `\.env`
	groupSID = "S-1-5-21-9-9-9-1010" // the elevated sandbox users' group
	sbxUser  = "S-1-5-21-9-9-9-1011" // the Offline sandbox user
)

func hiddenScene() *Model {
	m := scene()
	m.Put(ssh, true)
	for _, f := range []string{sshKey, sshPub, netrc, dotenv} {
		m.Put(f, false)
	}
	return m
}

func hiddenPolicy(mode policy.Mode) *policy.Policy {
	f := policytest.Fields{
		Mode: mode,
		Cwd:  proj,
		Hidden: []policy.Hidden{
			{Path: ssh, Kind: policy.Dir, Why: "ssh private keys", Reopen: []string{sshPub}},
			{Path: netrc, Kind: policy.File, Why: "netrc passwords"},
			{Path: dotenv, Kind: policy.File, Why: "deny_read **/.env"},
		},
	}
	if mode == policy.WorkspaceWrite {
		sp := scenePolicy()
		f.WritableRoots = sp.WritableRoots()
		f.Protected = sp.Protected()
		f.ProtectedNames = sp.ProtectedNames()
	}
	return policytest.New(f)
}

func notDir(string) bool { return false }

// TestHiddenUnelevated: at Low integrity the command reads none of the
// hidden files (nor one created later in a hidden directory), reads the
// re-opened key and the workspace, and still writes the workspace; the
// user's own programs read everything as before.
func TestHiddenUnelevated(t *testing.T) {
	for _, mode := range []policy.Mode{policy.WorkspaceWrite, policy.ReadOnly} {
		m := hiddenScene()
		pol := hiddenPolicy(mode)
		pl := PlanFor(pol, wsSID)
		pl.Merge(IntegrityPlan(pol, userSID))
		pl.Merge(HiddenPlan(pol, notDir, nil))
		m.ApplyPlan(pl)
		m.Put(ssh+`\id_new`, false) // made after the labels: inherits
		tok := lowToken
		if mode == policy.ReadOnly {
			tok = readOnlyTok
			tok.Integrity = LowIL
		}
		for _, c := range []struct {
			path string
			read bool
		}{
			{sshKey, false}, {ssh + `\id_new`, false}, {ssh, false}, {netrc, false}, {dotenv, false},
			{sshPub, true}, {proj + `\src\main.go`, true}, {docs + `\notes.txt`, true},
		} {
			if got := m.CanRead(tok, c.path); got != c.read {
				t.Errorf("%s: low token reads %s = %v, want %v", mode, c.path, got, c.read)
			}
			if !m.CanRead(userToken, c.path) {
				t.Errorf("%s: the user's own token cannot read %s", mode, c.path)
			}
		}
		for _, p := range []string{dotenv, sshPub, sshKey} {
			if m.CanWrite(tok, p) || m.CanDelete(tok, p) {
				t.Errorf("%s: %s writable or deletable", mode, p)
			}
		}
		if mode == policy.WorkspaceWrite && !m.CanWrite(tok, proj+`\src\main.go`) {
			t.Errorf("the workspace is no longer writable")
		}
	}
}

// TestHiddenUnelevatedNeedsLabel: without the plan, the same token reads
// every hidden file (the write-restricted token's DACL passes do not
// cover reads): the labels are what hides them.
func TestHiddenUnelevatedNeedsLabel(t *testing.T) {
	m := hiddenScene()
	pol := hiddenPolicy(policy.WorkspaceWrite)
	pl := PlanFor(pol, wsSID)
	pl.Merge(IntegrityPlan(pol, userSID))
	m.ApplyPlan(pl)
	for _, p := range []string{sshKey, netrc, dotenv} {
		if !m.CanRead(lowToken, p) {
			t.Errorf("%s unreadable without the hidden labels: the test proves nothing", p)
		}
	}
}

// TestHiddenElevated: the sandbox user reads none of the hidden files,
// reads the re-opened key, and keeps its grants elsewhere.
func TestHiddenElevated(t *testing.T) {
	for _, mode := range []policy.Mode{policy.WorkspaceWrite, policy.ReadOnly} {
		m := hiddenScene()
		// agentbox-setup's read grant on the profile for the group.
		m.Get(profile).DACL = append(m.Get(profile).DACL, ACE{Flags: ObjectInherit | ContainerInherit, Mask: FileGenericRead | FileGenericExecute, SID: groupSID})
		pol := hiddenPolicy(mode)
		pl := PlanFor(pol, wsSID)
		pl.Merge(PlanFor(pol, groupSID))
		pl.Merge(HiddenACLPlan(pol, groupSID, notDir, nil))
		m.ApplyPlan(pl)
		m.Put(ssh+`\id_new`, false)
		tok := SandboxToken([]string{sbxUser, groupSID, "BU", "WD", "AU", logonSID}, logonSID, wsSID)
		plain := Token{SIDs: []string{sbxUser, groupSID, "BU", "WD", "AU"}}
		for _, tk := range []Token{tok, plain} {
			for _, c := range []struct {
				path string
				read bool
			}{
				{sshKey, false}, {ssh + `\id_new`, false}, {ssh, false}, {netrc, false}, {dotenv, false},
				{sshPub, true}, {proj + `\src\main.go`, true}, {docs + `\notes.txt`, true},
			} {
				if got := m.CanRead(tk, c.path); got != c.read {
					t.Errorf("%s: sandbox user reads %s = %v, want %v", mode, c.path, got, c.read)
				}
			}
			if m.CanWrite(tk, dotenv) {
				t.Errorf("%s: .env writable", mode)
			}
			if mode == policy.WorkspaceWrite && tk.WriteRestricted && !m.CanWrite(tk, proj+`\src\main.go`) {
				t.Errorf("the workspace is no longer writable")
			}
		}
		if !m.CanRead(userToken, sshKey) {
			t.Error("the user's own token cannot read the key")
		}
	}
}

// TestUnhide: a path an earlier run hid and this one does not loses the
// hidden label (and, elevated, the deny) and reads again; protected and
// root labels stay.
func TestUnhide(t *testing.T) {
	m := hiddenScene()
	pol := hiddenPolicy(policy.WorkspaceWrite)
	first := HiddenPlan(pol, notDir, nil)
	first.Merge(HiddenACLPlan(pol, groupSID, notDir, nil))
	first.Merge(IntegrityPlan(pol, userSID))
	m.ApplyPlan(first)
	// The next policy re-opens .netrc (allow_read).
	next := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: proj, WritableRoots: pol.WritableRoots(), Protected: pol.Protected(),
		Hidden: []policy.Hidden{{Path: ssh, Kind: policy.Dir, Reopen: []string{sshPub}}, {Path: dotenv, Kind: policy.File}}})
	recorded := []string{ssh, sshPub, netrc, dotenv, proj, proj + `\.git`}
	pl := HiddenPlan(next, notDir, recorded)
	if len(pl.Unhide) != 3 || !SamePath(pl.Unhide[0], netrc) {
		t.Fatalf("unhide %v", pl.Unhide)
	}
	acl := HiddenACLPlan(next, groupSID, notDir, recorded)
	pl.Merge(acl)
	m.ApplyPlan(pl)
	if !m.CanRead(lowToken, netrc) || m.CanRead(lowToken, dotenv) {
		t.Errorf("after unhide: netrc %v, .env %v", m.CanRead(lowToken, netrc), m.CanRead(lowToken, dotenv))
	}
	if l := m.Get(proj + `\.git`).Label; l == nil || *l != ProtectedLabel {
		t.Errorf(".git label %v", l)
	}
	for _, a := range m.Get(netrc).DACL {
		if a.SID == groupSID {
			t.Errorf("netrc keeps %v", a)
		}
	}
}

// TestApplyHiddenLabels: Apply sets the hidden labels once, leaves a
// foreign label that already keeps Low readers out, refuses to replace
// any other foreign label, and cleanup's RevokeLabels takes ours off.
func TestApplyHiddenLabels(t *testing.T) {
	st := &labelStore{memStore: memStore{dacl: map[string]string{}}, label: map[string]string{}}
	for _, p := range []string{ssh, sshPub, netrc, dotenv} {
		st.dacl[Key(p)] = "D:AI(A;OICIID;FA;;;SY)"
	}
	pol := hiddenPolicy(policy.ReadOnly)
	pl := HiddenPlan(pol, notDir, nil)
	res, err := Apply(st, pl)
	if err != nil || len(res.Labeled) != 4 {
		t.Fatalf("%v %v", res.Labeled, err)
	}
	if st.label[Key(ssh)] != HiddenLabel.SACL() || st.label[Key(netrc)] != HiddenFileLabel.SACL() || st.label[Key(sshPub)] != ProtectedFileLabel.SACL() {
		t.Errorf("labels %v", st.label)
	}
	if res, err := Apply(st, pl); err != nil || len(res.Labeled) != 0 {
		t.Errorf("second apply: %v %v", res.Labeled, err)
	}
	st.label[Key(netrc)] = "S:(ML;;NWNR;;;HI)"
	if res, err := Apply(st, pl); err != nil || len(res.Labeled) != 0 || st.label[Key(netrc)] != "S:(ML;;NWNR;;;HI)" {
		t.Errorf("foreign hiding label: %v %v %v", res.Labeled, err, st.label[Key(netrc)])
	}
	st.label[Key(netrc)] = "S:(ML;;NW;;;LW)"
	if _, err := Apply(st, pl); err == nil || !strings.Contains(err.Error(), "did not set") {
		t.Errorf("foreign label replaced: %v", err)
	}
	st.label[Key(netrc)] = ""
	changed, err := RevokeLabels(st, []string{ssh, sshPub, netrc, dotenv})
	if err != nil || len(changed) != 3 {
		t.Errorf("revoke %v %v", changed, err)
	}
	for _, p := range []string{ssh, sshPub, dotenv} {
		if st.label[Key(p)] != "S:" {
			t.Errorf("%s keeps %q", p, st.label[Key(p)])
		}
	}
}
