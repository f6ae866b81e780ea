package acl

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

func TestACESDDLRoundTrip(t *testing.T) {
	for _, a := range []ACE{
		{Flags: ObjectInherit | ContainerInherit, Mask: AllowWrite, SID: wsSID},
		{Deny: true, Mask: DenyRenameAside, SID: wsSID},
		{Deny: true, Flags: ObjectInherit | ContainerInherit, Mask: DenyWrite, SID: "WD"},
	} {
		got, ok := ParseACE(a.SDDL())
		if !ok || got != a {
			t.Errorf("ParseACE(%s) = %+v, %v", a.SDDL(), got, ok)
		}
	}
	if got := (ACE{Flags: ObjectInherit | ContainerInherit, Mask: AllowWrite, SID: wsSID}).SDDL(); got != "(A;OICI;0x1301ff;;;S-1-5-21-11-22-33-44)" {
		t.Errorf("SDDL = %s", got)
	}
	a, ok := ParseACE("(A;OICIID;FA;;;SY)")
	if !ok || a.Mask != FileAllAccess || a.Flags != ObjectInherit|ContainerInherit|Inherited || a.SID != "SY" {
		t.Errorf("ParseACE(FA) = %+v %v", a, ok)
	}
	if _, ok := ParseACE("(OA;;CC;bf967aba-0de6-11d0-a285-00aa003049e2;;AU)"); ok {
		t.Error("object ACE parsed as plain ACE")
	}
}

func TestDACLAddCanonical(t *testing.T) {
	in := "D:AI(D;;FA;;;S-1-5-21-9-9-9-9)(A;;FA;;;SY)(XA;;FA;;;WD;(Member_of {SID(BA)}))(A;OICIID;FA;;;BA)(A;OICIID;0x1200a9;;;BU)"
	d, err := ParseDACL(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ACEs) != 5 || d.ACEs[2].OK {
		t.Fatalf("parsed %d ACEs, conditional OK=%v", len(d.ACEs), d.ACEs[2].OK)
	}
	allow := ACE{Flags: ObjectInherit | ContainerInherit, Mask: AllowWrite, SID: wsSID}
	deny := ACE{Deny: true, Mask: DenyRenameAside, SID: wsSID}
	for _, a := range []ACE{allow, deny} {
		if ch, err := d.Add(a); !ch || err != nil {
			t.Fatalf("Add(%s) = %v, %v", a, ch, err)
		}
	}
	want := "D:AI(D;;FA;;;S-1-5-21-9-9-9-9)(D;;0x10040;;;S-1-5-21-11-22-33-44)(A;;FA;;;SY)(XA;;FA;;;WD;(Member_of {SID(BA)}))" +
		"(A;OICI;0x1301ff;;;S-1-5-21-11-22-33-44)(A;OICIID;FA;;;BA)(A;OICIID;0x1200a9;;;BU)"
	if got := d.String(); got != want {
		t.Errorf("merged\n got %s\nwant %s", got, want)
	}
	// Already there: no change. A broader existing grant also counts.
	if ch, _ := d.Add(allow); ch {
		t.Error("second Add changed the DACL")
	}
	d2, _ := ParseDACL("D:(A;OICI;FA;;;" + wsSID + ")")
	if ch, _ := d2.Add(allow); ch {
		t.Error("FA grant did not satisfy AllowWrite")
	}
	// An inherited grant is not ours: it may vanish when the parent changes.
	d3, _ := ParseDACL("D:(A;OICIID;FA;;;" + wsSID + ")")
	if ch, _ := d3.Add(allow); !ch {
		t.Error("inherited grant treated as explicit")
	}
	if n := d.RemoveSID(wsSID); n != 2 || strings.Contains(d.String(), wsSID) {
		t.Errorf("RemoveSID removed %d: %s", n, d)
	}
	if _, err := (&DACL{Null: true}).Add(allow); !errors.Is(err, ErrNullDACL) {
		t.Errorf("NULL DACL: %v", err)
	}
	if got := d.Explicit(); got != "D:AI(D;;FA;;;S-1-5-21-9-9-9-9)(A;;FA;;;SY)(XA;;FA;;;WD;(Member_of {SID(BA)}))" {
		t.Errorf("Explicit = %s", got)
	}
	if d, _ := ParseDACL("O:BAD:PAI(A;;FA;;;SY)S:AI"); d.Flags != "PAI" || !d.Protected() || len(d.ACEs) != 1 {
		t.Errorf("parse with owner/sacl: %+v", d)
	}
}

type memStore struct {
	dacl map[string]string
	sets []string
}

func (m *memStore) GetDACL(p string) (string, error) {
	s, ok := m.dacl[Key(p)]
	if !ok {
		return "", fs.ErrNotExist
	}
	return s, nil
}
func (m *memStore) SetDACL(p, sddl string, protected bool) error {
	m.dacl[Key(p)] = sddl
	m.sets = append(m.sets, p)
	return nil
}
func (m *memStore) Mkdir(p string) error {
	if _, ok := m.dacl[Key(p)]; ok {
		return fs.ErrExist
	}
	m.dacl[Key(p)] = "D:AI(A;OICIID;FA;;;SY)"
	return nil
}

func TestApplyIdempotent(t *testing.T) {
	st := &memStore{dacl: map[string]string{}}
	for _, p := range []string{temp, proj, proj + `\.git`, proj + `\.codex`, proj + `\.git\worktrees`, proj + `\.git\worktrees\wt`, wt, wt + `\.git`} {
		st.dacl[Key(p)] = "D:AI(A;OICIID;FA;;;SY)"
	}
	pl := PlanFor(scenePolicy(), wsSID)
	r1, err := Apply(st, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Modified) == 0 || len(r1.Created) != 6 {
		t.Fatalf("first run: %+v", r1)
	}
	r2, err := Apply(st, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(r2.Modified) != 0 || len(r2.Created) != 0 || r2.Checked != r1.Checked {
		t.Fatalf("second run modified %v created %v (checked %d/%d)", r2.Modified, r2.Created, r2.Checked, r1.Checked)
	}
	// Each path is written once even when it gets several ACEs.
	seen := map[string]bool{}
	for _, p := range st.sets {
		if seen[Key(p)] {
			t.Errorf("%s written twice", p)
		}
		seen[Key(p)] = true
	}
	got, err := Revoke(st, r1.Modified, wsSID)
	if err != nil || len(got) != len(r1.Modified) {
		t.Fatalf("Revoke = %v, %v", got, err)
	}
	for k, v := range st.dacl {
		if strings.Contains(v, wsSID) {
			t.Errorf("%s still has %s", k, v)
		}
	}
}

func TestPlanEntries(t *testing.T) {
	pl := PlanFor(scenePolicy(), wsSID)
	var got []string
	for _, e := range pl.Entries {
		got = append(got, e.Path+" "+e.ACE.SDDL())
	}
	want := []string{
		temp + " (A;OICI;0x1301ff;;;" + wsSID + ")",
		proj + " (A;OICI;0x1301ff;;;" + wsSID + ")",
		wt + " (A;OICI;0x1301ff;;;" + wsSID + ")",
		temp + `\.agents (D;OICI;0xd0156;;;` + wsSID + ")",
		temp + `\.codex (D;OICI;0xd0156;;;` + wsSID + ")",
		temp + `\.git (D;OICI;0xd0156;;;` + wsSID + ")",
		proj + `\.agents (D;OICI;0xd0156;;;` + wsSID + ")",
		proj + `\.codex (D;OICI;0xd0156;;;` + wsSID + ")",
		proj + `\.git (D;OICI;0xd0156;;;` + wsSID + ")",
		proj + `\.git\worktrees\wt (D;OICI;0xd0156;;;` + wsSID + ")",
		wt + `\.agents (D;OICI;0xd0156;;;` + wsSID + ")",
		wt + `\.codex (D;OICI;0xd0156;;;` + wsSID + ")",
		wt + `\.git (D;;0xd0156;;;` + wsSID + ")",
		temp + " (D;;0x10040;;;" + wsSID + ")",
		proj + " (D;;0x10040;;;" + wsSID + ")",
		proj + `\.git (D;;0x10040;;;` + wsSID + ")",
		proj + `\.git\worktrees (D;;0x10040;;;` + wsSID + ")",
		wt + " (D;;0x10040;;;" + wsSID + ")",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if pl := PlanFor(policytest.New(policytest.Fields{Mode: policy.DangerFullAccess}), wsSID); len(pl.Entries) != 0 {
		t.Error("full access planned ACEs")
	}
}

func TestPaths(t *testing.T) {
	for _, c := range []struct {
		p, root string
		want    bool
	}{
		{`C:\Work\x`, `c:\work`, true}, {`c:/work`, `C:\WORK\`, true}, {`C:\Workspace`, `C:\Work`, false},
		{`C:\x`, `C:\`, true}, {`D:\x`, `C:\`, false},
	} {
		if got := Within(c.p, c.root); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.p, c.root, got)
		}
	}
	for in, want := range map[string]string{`C:\a\b`: `C:\a`, `C:\a`: `C:\`, `C:\`: `C:\`, `\\srv\share\x`: `\\srv\share`} {
		if got := Parent(in); got != want {
			t.Errorf("Parent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTokenDefaultDACL(t *testing.T) {
	got := TokenDefaultDACL(userSID, logonSID, wsSID)
	d, err := ParseDACL(got)
	if err != nil || len(d.ACEs) != 4 {
		t.Fatalf("%s: %v", got, err)
	}
	for _, s := range []string{userSID, "SY", logonSID, wsSID} {
		if !d.Has(ACE{Mask: FileAllAccess, SID: s}) {
			t.Errorf("default DACL lacks GENERIC_ALL for %s: %s", s, got)
		}
	}
	for _, a := range d.ACEs {
		if canonicalSID(a.Parsed.SID) == Everyone {
			t.Errorf("default DACL grants Everyone: %s", got)
		}
	}
	// In the access-check model: what the child creates (a pipe) is
	// usable by the child through both passes of its write-restricted
	// token, by the user (agentbox's end), and by nobody else holding
	// only Everyone and Authenticated Users.
	m := NewModel()
	var aces []ACE
	for _, a := range d.ACEs {
		aces = append(aces, a.Parsed)
	}
	const pipe = `\\.\pipe\child-made`
	m.Put(pipe, false, aces...)
	if !m.CanRead(sandboxToken, pipe) || !m.CanWrite(sandboxToken, pipe) {
		t.Error("the sandboxed child cannot use the pipe it created")
	}
	if !m.CanRead(userToken, pipe) || !m.CanWrite(userToken, pipe) {
		t.Error("the user cannot use the child's pipe")
	}
	other := Token{SIDs: []string{"S-1-5-21-9-9-9-1001", "BU", "WD", "AU", "S-1-5-5-0-999"}}
	if m.CanRead(other, pipe) || m.CanWrite(other, pipe) {
		t.Error("another user's process can use the child's pipe")
	}
}

func TestDesktopDACL(t *testing.T) {
	got := DesktopDACL(logonSID)
	if !strings.HasPrefix(got, "D:P(") {
		t.Errorf("desktop DACL %s is not protected", got)
	}
	d, err := ParseDACL(got)
	if err != nil || len(d.ACEs) != 1 {
		t.Fatalf("%s: %v", got, err)
	}
	a := d.ACEs[0].Parsed
	if a.Deny || a.SID != logonSID || a.Mask != DesktopAllAccess || a.Flags != 0 {
		t.Errorf("desktop ACE %+v, want only the logon SID with DESKTOP_ALL_ACCESS", a)
	}
	// Nobody else: not Everyone, not the user, not the sandbox SID alone.
	for _, s := range []string{"WD", userSID, wsSID} {
		if strings.Contains(got, s) {
			t.Errorf("desktop DACL %s names %s", got, s)
		}
	}
}

// linkStore is a memStore where some paths are links: GetDACL/SetDACL
// (by name) reach the target's DACL, the Link calls the link object's.
type linkStore struct {
	memStore
	links map[string]string // link object DACLs
	lsets []string
}

func (l *linkStore) IsLink(p string) (bool, error) { _, ok := l.links[Key(p)]; return ok, nil }
func (l *linkStore) GetLinkDACL(p string) (string, error) {
	return l.links[Key(p)], nil
}
func (l *linkStore) SetLinkDACL(p, sddl string, protected bool) error {
	l.links[Key(p)] = sddl
	l.lsets = append(l.lsets, p)
	return nil
}

// A protected path that is a link (symlink or junction) gets the deny on
// the link object itself, which Get/SetNamedSecurityInfo never reach: the
// link's inherited allow (DELETE included) would let the command delete
// it and put another link there.
func TestApplyDeniesOnLinkObject(t *testing.T) {
	pol := policytest.New(policytest.Fields{
		Mode: policy.WorkspaceWrite, Cwd: `C:\w`, WritableRoots: []string{`C:\w`},
		Protected: []policy.Protected{
			{Path: `C:\w\.agents`, Kind: policy.Symlink, Root: `C:\w`},
			{Path: `C:\w\.git`, Kind: policy.Dir, Root: `C:\w`},
		},
	})
	inherited := "D:AI(A;OICIID;0x1301bf;;;" + wsSID + ")(A;OICIID;FA;;;SY)"
	st := &linkStore{
		memStore: memStore{dacl: map[string]string{
			Key(`C:\w`): "D:(A;OICI;FA;;;SY)", Key(`C:\w\.agents`): "D:(A;OICI;FA;;;SY)", Key(`C:\w\.git`): "D:(A;OICI;FA;;;SY)",
		}},
		links: map[string]string{Key(`C:\w\.agents`): inherited},
	}
	pl := PlanFor(pol, wsSID)
	if _, err := Apply(st, pl); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDACL(st.links[Key(`C:\w\.agents`)])
	if err != nil {
		t.Fatal(err)
	}
	if !d.Has(ACE{Deny: true, Mask: DenyWrite, SID: wsSID}) {
		t.Errorf("link object DACL %s lacks the deny (DELETE included)", st.links[Key(`C:\w\.agents`)])
	}
	if DenyWrite&Delete == 0 {
		t.Error("DenyWrite lacks DELETE")
	}
	// The deny must come before the inherited allow (canonical order).
	if !d.ACEs[0].Parsed.Deny {
		t.Errorf("link DACL not canonical: %s", st.links[Key(`C:\w\.agents`)])
	}
	// The target got it too; .git, not a link, has no link write.
	if d, _ := ParseDACL(st.dacl[Key(`C:\w\.agents`)]); !d.Has(ACE{Deny: true, Mask: DenyWrite, SID: wsSID}) {
		t.Errorf("target DACL lacks the deny: %s", st.dacl[Key(`C:\w\.agents`)])
	}
	if len(st.lsets) != 1 {
		t.Errorf("link DACL writes %v, want one", st.lsets)
	}
	// Idempotent, and cleanup revokes the link's ACE too.
	res, err := Apply(st, pl)
	if err != nil || len(res.Modified) != 0 || len(st.lsets) != 1 {
		t.Errorf("second Apply modified %v, %v (link writes %v)", res.Modified, err, st.lsets)
	}
	if _, err := Revoke(st, []string{`C:\w\.agents`}, wsSID); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(st.links[Key(`C:\w\.agents`)], "(D;") {
		t.Errorf("Revoke left the link's deny: %s", st.links[Key(`C:\w\.agents`)])
	}
}

// labelStore is memStore with labels.
type labelStore struct {
	memStore
	label     map[string]string
	labelSets []string
}

func (m *labelStore) GetLabel(p string) (string, error) {
	if _, ok := m.dacl[Key(p)]; !ok {
		return "", fs.ErrNotExist
	}
	return m.label[Key(p)], nil
}
func (m *labelStore) SetLabel(p, sacl string) error {
	m.label[Key(p)] = sacl
	m.labelSets = append(m.labelSets, p)
	return nil
}

func TestApplyLabels(t *testing.T) {
	st := &labelStore{memStore: memStore{dacl: map[string]string{}}, label: map[string]string{}}
	for _, p := range []string{temp, proj, proj + `\.git`, proj + `\.codex`, proj + `\.git\worktrees`, proj + `\.git\worktrees\wt`, wt, wt + `\.git`} {
		st.dacl[Key(p)] = "D:AI(A;OICIID;FA;;;SY)"
	}
	// proj\.codex already inherits a Low label: not the explicit Medium.
	st.label[Key(proj+`\.codex`)] = "S:(ML;OICIID;NW;;;LW)"
	pl := PlanFor(scenePolicy(), wsSID)
	pl.Merge(IntegrityPlan(scenePolicy(), userSID))
	r1, err := Apply(st, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Labeled) != len(pl.Labels) {
		t.Fatalf("first run labelled %v, want all %d", r1.Labeled, len(pl.Labels))
	}
	if got := st.label[Key(proj)]; got != "S:(ML;OICI;NW;;;LW)" {
		t.Errorf("root label %q", got)
	}
	if got := st.label[Key(proj+`\.codex`)]; got != "S:(ML;OICI;NW;;;ME)" {
		t.Errorf(".codex label %q", got)
	}
	if got := st.label[Key(wt+`\.git`)]; got != "S:(ML;;NW;;;ME)" {
		t.Errorf("worktree .git file label %q", got)
	}
	if d := st.dacl[Key(proj)]; !strings.Contains(d, "(D;;0x40;;;"+userSID+")") {
		t.Errorf("root DACL lacks the user-SID FILE_DELETE_CHILD guard: %s", d)
	}
	r2, err := Apply(st, pl)
	if err != nil || len(r2.Labeled) != 0 || len(r2.Modified) != 0 {
		t.Fatalf("second run: %+v, %v", r2, err)
	}
	// A store that cannot write labels must not silently skip them.
	if _, err := Apply(&memStore{dacl: st.dacl}, pl); err == nil {
		t.Error("labels skipped on a store without label support")
	}
	changed, err := RevokeLabels(st, append(r1.Labeled, docs))
	if err != nil || len(changed) != len(r1.Labeled) {
		t.Fatalf("RevokeLabels = %v, %v", changed, err)
	}
	for _, p := range r1.Labeled {
		if l, ok := ParseLabel(st.label[Key(p)]); ok {
			t.Errorf("%s still labelled %v", p, l)
		}
	}
	// Somebody else's label stays.
	st.label[Key(proj)] = "S:(ML;;NW;;;HI)"
	if changed, _ := RevokeLabels(st, []string{proj}); len(changed) != 0 {
		t.Errorf("revoked a foreign label: %v", changed)
	}
}

// The Low-integrity command must be able to open its desktop for writing.
func TestDesktopLabel(t *testing.T) {
	l, ok := ParseLabel(UserObjectLabel.SACL())
	if !ok || l.Level != LowIL || mandatoryAllowed(LowIL, l) != ^uint32(0) {
		t.Errorf("desktop label %+v, %v: the Low command could not create windows on it", l, ok)
	}
	if mandatoryAllowed(LowIL, DefaultLabel)&DesktopAllAccess == DesktopAllAccess {
		t.Error("an unlabelled desktop would already do: the label test is vacuous")
	}
}

// Cleanup removes the user-SID guard and nothing else of the user's.
func TestRevokeUserGuards(t *testing.T) {
	st := &memStore{dacl: map[string]string{
		Key(proj): "D:(D;;0x40;;;" + userSID + ")(A;OICI;FA;;;" + userSID + ")(D;;0x10040;;;" + userSID + ")(A;OICIID;FA;;;SY)",
	}}
	changed, err := RevokeUserGuards(st, []string{proj, docs}, userSID)
	if err != nil || len(changed) != 1 {
		t.Fatalf("RevokeUserGuards = %v, %v", changed, err)
	}
	if got, want := st.dacl[Key(proj)], "D:(A;OICI;FA;;;"+userSID+")(D;;0x10040;;;"+userSID+")"; got != want {
		t.Errorf("DACL after revoke = %s, want %s", got, want)
	}
}

func TestStationDACL(t *testing.T) {
	got := StationDACL(logonSID, "S-1-5-21-1-2-3-4")
	d, err := ParseDACL(got)
	if err != nil || !d.Protected() || len(d.ACEs) != 2 {
		t.Fatalf("%s: %+v, %v", got, d, err)
	}
	for i, sid := range []string{logonSID, "S-1-5-21-1-2-3-4"} {
		if a := d.ACEs[i].Parsed; a.Deny || a.SID != sid || a.Mask != StationAllAccess {
			t.Errorf("ACE %d = %+v", i, a)
		}
	}
}

func TestLongPath(t *testing.T) {
	long := `C:\` + strings.Repeat(`d\`, 130) + "f"
	for in, want := range map[string]string{
		`C:\short`:                             `C:\short`,
		long:                                   `\\?\` + long,
		strings.ReplaceAll(long, `\`, "/"):     `\\?\` + long,
		`\\?\` + long:                          `\\?\` + long,
		`\\server\share\` + long[3:]:           `\\?\UNC\server\share\` + long[3:],
		`relative\` + strings.Repeat("x", 300): `relative\` + strings.Repeat("x", 300),
	} {
		if got := LongPath(in); got != want {
			t.Errorf("LongPath(%.40q...) = %.60q..., want %.60q...", in, got, want)
		}
	}
}
