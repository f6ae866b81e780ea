package acl

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// The scene: a user profile with a repository (proj), a linked worktree of
// it (wt) whose gitdir lives inside proj\.git, the temp dir, places outside
// every root, and one world-writable directory.
const (
	userSID  = "S-1-5-21-100-200-300-1001"
	logonSID = "S-1-5-5-0-4242"
	wsSID    = "S-1-5-21-11-22-33-44"
	roSID    = "S-1-5-21-55-66-77-88"

	profile = `C:\Users\u`
	proj    = `C:\Users\u\src\proj`
	wt      = `C:\Users\u\src\wt`
	temp    = `C:\Users\u\AppData\Local\Temp`
	docs    = `C:\Users\u\Documents`
	shared  = `C:\ProgramData\Shared`
)

func scene() *Model {
	m := NewModel()
	full := func(sid string) ACE {
		return ACE{Flags: ObjectInherit | ContainerInherit, Mask: FileAllAccess, SID: sid}
	}
	m.Put(`C:\`, true, full("SY"), full("BA"),
		ACE{Flags: ObjectInherit | ContainerInherit, Mask: FileGenericRead | FileGenericExecute, SID: "BU"},
		// Authenticated Users may create folders in C:\ itself.
		ACE{Mask: FileAddSubdirectory, SID: "AU"})
	m.Put(`C:\Users`, true)
	m.Put(profile, true, full(userSID))
	for _, d := range []string{`C:\Users\u\src`, proj, proj + `\src`, proj + `\.git`, proj + `\.git\worktrees`,
		proj + `\.git\worktrees\wt`, proj + `\.codex`, wt, `C:\Users\u\AppData`, `C:\Users\u\AppData\Local`, temp, docs,
		`C:\Windows`, `C:\Windows\System32`, `C:\ProgramData`} {
		m.Put(d, true)
	}
	m.Put(shared, true, ACE{Flags: ObjectInherit | ContainerInherit, Mask: FileAllAccess, SID: "WD"})
	for _, f := range []string{proj + `\src\main.go`, proj + `\.git\config`, proj + `\.git\HEAD`,
		proj + `\.git\worktrees\wt\HEAD`, proj + `\.codex\config.toml`, wt + `\.git`, wt + `\file.txt`,
		temp + `\old.txt`, docs + `\notes.txt`, `C:\Windows\System32\hosts`, shared + `\x.txt`} {
		m.Put(f, false)
	}
	return m
}

func scenePolicy() *policy.Policy {
	return policytest.New(policytest.Fields{
		Mode:          policy.WorkspaceWrite,
		Cwd:           proj,
		WritableRoots: []string{temp, proj, wt},
		Protected: []policy.Protected{
			{Path: temp + `\.agents`, Kind: policy.Missing, Root: temp},
			{Path: temp + `\.codex`, Kind: policy.Missing, Root: temp},
			{Path: temp + `\.git`, Kind: policy.Missing, Root: temp},
			{Path: proj + `\.agents`, Kind: policy.Missing, Root: proj},
			{Path: proj + `\.codex`, Kind: policy.Dir, Root: proj},
			{Path: proj + `\.git`, Kind: policy.Dir, Root: proj},
			{Path: proj + `\.git\worktrees\wt`, Kind: policy.Dir, Root: proj, Why: "gitdir of " + wt + `\.git`},
			{Path: wt + `\.agents`, Kind: policy.Missing, Root: wt},
			{Path: wt + `\.codex`, Kind: policy.Missing, Root: wt},
			{Path: wt + `\.git`, Kind: policy.File, Root: wt},
		},
		ProtectedNames: policy.DefaultProtectedNames(),
	})
}

// userToken is the user's own token; sandboxToken is what agentbox builds
// from it (restricting SIDs Everyone, logon SID, synthetic SID).
var (
	userToken    = Token{SIDs: []string{userSID, "BU", "WD", "AU", logonSID}}
	sandboxToken = SandboxToken(userToken.SIDs, logonSID, wsSID)
	readOnlyTok  = SandboxToken(userToken.SIDs, logonSID, roSID)
)

type row struct {
	name string
	can  func(*Model, Token) bool
	want bool
}

func write(p string) func(*Model, Token) bool {
	return func(m *Model, t Token) bool { return m.CanWrite(t, p) }
}
func read(p string) func(*Model, Token) bool {
	return func(m *Model, t Token) bool { return m.CanRead(t, p) }
}
func create(dir string) func(*Model, Token) bool {
	return func(m *Model, t Token) bool { return m.CanCreate(t, dir, false) }
}
func mkdir(dir string) func(*Model, Token) bool {
	return func(m *Model, t Token) bool { return m.CanCreate(t, dir, true) }
}
func del(p string) func(*Model, Token) bool {
	return func(m *Model, t Token) bool { return m.CanDelete(t, p) }
}
func rename(a, b string) func(*Model, Token) bool {
	return func(m *Model, t Token) bool { return m.CanRename(t, a, b) }
}

// policyTable is DESIGN.md's workspace-write table spelled out.
var policyTable = []row{
	{"write in workspace", write(proj + `\src\main.go`), true},
	{"create file in workspace", create(proj + `\src`), true},
	{"mkdir in workspace root", mkdir(proj), true},
	{"delete in workspace", del(proj + `\src\main.go`), true},
	{"rename in workspace", rename(proj+`\src\main.go`, proj+`\src\b.go`), true},
	{"delete top-level file of workspace", del(proj + `\src`), true},
	{"write in second root", write(wt + `\file.txt`), true},
	{"write in temp", write(temp + `\old.txt`), true},
	{"create in temp", create(temp), true},
	{"delete in temp", del(temp + `\old.txt`), true},

	{"write .git\\config", write(proj + `\.git\config`), false},
	{"create in .git", create(proj + `\.git`), false},
	{"mkdir in .git", mkdir(proj + `\.git`), false},
	{"delete .git\\HEAD", del(proj + `\.git\HEAD`), false},
	{"delete .git", del(proj + `\.git`), false},
	{"rename .git aside", rename(proj+`\.git`, proj+`\.git-old`), false},
	{"rename .git into src", rename(proj+`\.git`, proj+`\src\.git`), false},
	{"rename file out of .git", rename(proj+`\.git\config`, proj+`\config`), false},
	{"rename file into .git", rename(proj+`\src\main.go`, proj+`\.git\hooks`), false},
	{"replace .git\\HEAD by rename", rename(proj+`\src\main.go`, proj+`\.git\HEAD`), false},
	{"write gitdir of worktree", write(proj + `\.git\worktrees\wt\HEAD`), false},
	{"create in gitdir of worktree", create(proj + `\.git\worktrees\wt`), false},
	{"rename gitdir's parent aside", rename(proj+`\.git\worktrees`, proj+`\.git\w2`), false},
	{"write worktree .git file", write(wt + `\.git`), false},
	{"delete worktree .git file", del(wt + `\.git`), false},
	{"rename worktree .git file aside", rename(wt+`\.git`, wt+`\git.bak`), false},
	{"write .codex", write(proj + `\.codex\config.toml`), false},
	{"create in .codex", create(proj + `\.codex`), false},
	{"rename .codex aside", rename(proj+`\.codex`, proj+`\c`), false},
	{"create in missing .agents placeholder", create(proj + `\.agents`), false},
	{"delete .agents placeholder", del(proj + `\.agents`), false},
	{"rename .agents placeholder aside", rename(proj+`\.agents`, proj+`\a`), false},
	{"create in temp .git placeholder", create(temp + `\.git`), false},
	{"rename workspace root aside", rename(proj, `C:\Users\u\src\proj2`), false},
	{"delete workspace root", del(proj), false},

	{"write outside", write(docs + `\notes.txt`), false},
	{"create outside", create(docs), false},
	{"delete outside", del(docs + `\notes.txt`), false},
	{"rename outside", rename(docs+`\notes.txt`, docs+`\n.txt`), false},
	{"move workspace file outside", rename(proj+`\src\main.go`, docs+`\main.go`), false},
	{"mkdir in C:\\", mkdir(`C:\`), false},
	{"write system file", write(`C:\Windows\System32\hosts`), false},
	// Documented limitation: Everyone is a restricting SID, so a
	// directory writable by Everyone stays writable.
	{"write world-writable dir (limitation)", write(shared + `\x.txt`), true},

	{"read workspace", read(proj + `\src\main.go`), true},
	{"read .git", read(proj + `\.git\config`), true},
	{"read worktree .git file", read(wt + `\.git`), true},
	{"read outside", read(docs + `\notes.txt`), true},
	{"read system file", read(`C:\Windows\System32\hosts`), true},
}

func TestPolicyTable(t *testing.T) {
	m := scene()
	m.ApplyPlan(PlanFor(scenePolicy(), wsSID))
	for _, r := range policyTable {
		if got := r.can(m, sandboxToken); got != r.want {
			t.Errorf("sandbox token: %s = %v, want %v", r.name, got, r.want)
		}
	}
}

// The ACEs are for a SID only the sandbox token carries (and only as a
// restricting SID), so the user's own access is unchanged everywhere.
func TestUserAccessUnchanged(t *testing.T) {
	before, after := scene(), scene()
	pl := PlanFor(scenePolicy(), wsSID)
	before.ApplyPlan(Plan{Mkdirs: pl.Mkdirs}) // same placeholders, no ACEs
	after.ApplyPlan(pl)
	for _, r := range policyTable {
		if b, a := r.can(before, userToken), r.can(after, userToken); a != b {
			t.Errorf("user token: %s changed from %v to %v", r.name, b, a)
		}
	}
	if !after.CanWrite(userToken, proj+`\.git\config`) {
		t.Error("user can no longer write .git\\config")
	}
}

func TestReadOnlyPolicy(t *testing.T) {
	m := scene()
	// The workspace SID's grants are on disk from an earlier
	// workspace-write run; a read-only run uses a different SID.
	m.ApplyPlan(PlanFor(scenePolicy(), wsSID))
	ro := policytest.New(policytest.Fields{Mode: policy.ReadOnly, Cwd: proj})
	if pl := PlanFor(ro, roSID); len(pl.Entries) != 0 || len(pl.Mkdirs) != 0 {
		t.Fatalf("read-only plan = %+v, want empty", pl)
	}
	for _, r := range []row{
		{"write workspace", write(proj + `\src\main.go`), false},
		{"create in workspace", create(proj), false},
		{"delete in workspace", del(proj + `\src\main.go`), false},
		{"write temp", write(temp + `\old.txt`), false},
		{"read workspace", read(proj + `\src\main.go`), true},
		{"read outside", read(docs + `\notes.txt`), true},
	} {
		if got := r.can(m, readOnlyTok); got != r.want {
			t.Errorf("read-only token: %s = %v, want %v", r.name, got, r.want)
		}
	}
}

// Without the rename-aside guards, FILE_DELETE_CHILD inherited from the
// root would let .git be renamed away even though .git denies DELETE: this
// shows the guards are load-bearing.
func TestRenameGuardsNeeded(t *testing.T) {
	pl := PlanFor(scenePolicy(), wsSID)
	var noGuards Plan
	noGuards.Mkdirs = pl.Mkdirs
	for _, e := range pl.Entries {
		if e.ACE.Mask != DenyRenameAside {
			noGuards.Entries = append(noGuards.Entries, e)
		}
	}
	m := scene()
	m.ApplyPlan(noGuards)
	if !m.CanRename(sandboxToken, proj+`\.git`, proj+`\.git-old`) {
		t.Fatal("model says .git cannot be renamed aside even without guards; guard test is vacuous")
	}
}

// Under the narrow reading of "write access" (only GENERIC_WRITE's file
// bits), DELETE would not be checked against the restricting SIDs and the
// sandbox could delete and rename anything the user can. This pins down
// exactly which rows depend on the reading; the Windows enforcement tests
// (enforce_windows_test.go) settle it on a real host.
func TestNarrowWriteReading(t *testing.T) {
	m := scene()
	m.WriteMask = GenericWriteOnly
	m.ApplyPlan(PlanFor(scenePolicy(), wsSID))
	for _, r := range []row{
		{"write .git\\config", write(proj + `\.git\config`), false},
		{"write outside", write(docs + `\notes.txt`), false},
		{"create outside", create(docs), false},
		{"delete outside", del(docs + `\notes.txt`), true},
		{"rename .git aside", rename(proj+`\.git`, proj+`\.git-old`), true},
	} {
		if got := r.can(m, sandboxToken); got != r.want {
			t.Errorf("narrow reading: %s = %v, want %v", r.name, got, r.want)
		}
	}
}

func TestEffectiveInheritance(t *testing.T) {
	m := NewModel()
	m.Put(`C:\a`, true,
		ACE{Flags: ObjectInherit, Mask: 1, SID: "X"},
		ACE{Flags: ContainerInherit, Mask: 2, SID: "X"},
		ACE{Flags: ObjectInherit | ContainerInherit | NoPropagate, Mask: 4, SID: "X"},
		ACE{Flags: ObjectInherit | ContainerInherit | InheritOnly, Mask: 8, SID: "X"})
	m.Put(`C:\a\d`, true)
	m.Put(`C:\a\f`, false)
	m.Put(`C:\a\d\f`, false)
	m.Put(`C:\a\d\e`, true)
	masks := func(p string) uint32 {
		var x uint32
		for _, a := range m.Effective(p) {
			x |= a.Mask
		}
		return x
	}
	for p, want := range map[string]uint32{
		`C:\a`: 1 | 2 | 4, `C:\a\d`: 2 | 4 | 8, `C:\a\f`: 1 | 4 | 8, `C:\a\d\f`: 1 | 8, `C:\a\d\e`: 2 | 8,
	} {
		if got := masks(p); got != want {
			t.Errorf("Effective(%s) masks = %#x, want %#x", p, got, want)
		}
	}
}

func TestCheckOrder(t *testing.T) {
	allow := ACE{Mask: FileWriteData | FileReadData, SID: "X"}
	deny := ACE{Deny: true, Mask: FileWriteData, SID: "X"}
	if check([]ACE{deny, allow}, []string{"X"}, FileWriteData) {
		t.Error("deny before allow must deny")
	}
	// An allow earlier in the list wins over a later deny (which is why
	// canonical order puts denies first).
	if !check([]ACE{allow, deny}, []string{"X"}, FileWriteData) {
		t.Error("allow before deny must allow")
	}
	if check(nil, []string{"X"}, FileReadData) {
		t.Error("empty DACL must deny")
	}
	if check([]ACE{{Mask: FileReadData, SID: "Y"}}, []string{"X"}, FileReadData) {
		t.Error("ACE for another SID must not grant")
	}
}

// lowToken is the unelevated recipe with the mandatory-integrity fix: the
// same restricted token, lowered to Low integrity.
var lowToken = func() Token { t := sandboxToken; t.Integrity = LowIL; return t }()

// fullPlan is what the unelevated backend applies: the ACEs for the
// workspace SID and the integrity labels with their user-SID guards.
func fullPlan() Plan {
	pl := PlanFor(scenePolicy(), wsSID)
	pl.Merge(IntegrityPlan(scenePolicy(), userSID))
	return pl
}

// The labels make the policy table hold even under the narrow reading of
// "write access" (DELETE and FILE_DELETE_CHILD not checked against the
// restricting SIDs, as observed for Codex #32915): TestNarrowWriteReading
// shows the same rows failing for the old recipe.
func TestIntegrityClosesNarrowReading(t *testing.T) {
	for _, mask := range []uint32{GenericWriteOnly, WriteAccess} {
		m := scene()
		m.WriteMask = mask
		m.ApplyPlan(fullPlan())
		for _, r := range policyTable {
			want := r.want
			switch r.name {
			case "write world-writable dir (limitation)":
				want = false // Medium by default: the label check denies it
			case "delete workspace root":
				// Under the narrow reading the root's own DELETE is
				// the user's. The model ignores that only an empty
				// directory can be deleted: the root holds .git,
				// which the command can neither delete nor move out
				// (rows above), so the root never becomes empty.
				// Renaming it needs the Medium parent: denied.
				if mask == GenericWriteOnly {
					want = true
				}
			}
			if got := r.can(m, lowToken); got != want {
				t.Errorf("mask %#x, low token: %s = %v, want %v", mask, r.name, got, want)
			}
		}
	}
}

// Each part of the fix is load-bearing: without the labels the Low token
// cannot write in the workspace; without the Medium label on .git or the
// user-SID guard on its parent, .git can be renamed aside; without the
// Low token the old escape is back.
func TestIntegrityPartsNeeded(t *testing.T) {
	full := fullPlan()
	without := func(drop func(LabelEntry) bool, dropE func(Entry) bool) *Model {
		var pl Plan
		pl.Mkdirs = full.Mkdirs
		for _, l := range full.Labels {
			if !drop(l) {
				pl.Labels = append(pl.Labels, l)
			}
		}
		for _, e := range full.Entries {
			if !dropE(e) {
				pl.Entries = append(pl.Entries, e)
			}
		}
		m := scene()
		m.WriteMask = GenericWriteOnly
		m.ApplyPlan(pl)
		return m
	}
	none := func(LabelEntry) bool { return false }
	noneE := func(Entry) bool { return false }
	if m := without(func(l LabelEntry) bool { return l.Label == RootLabel }, noneE); m.CanWrite(lowToken, proj+`\src\main.go`) {
		t.Error("without root labels the Low token can still write the workspace; the root label test is vacuous")
	}
	if m := without(func(l LabelEntry) bool { return SamePath(l.Path, proj+`\.git`) }, noneE); !m.CanRename(lowToken, proj+`\.git\config`, proj+`\config`) {
		t.Error("without .git's Medium label its files still cannot be moved out; the label test is vacuous")
	}
	if m := without(none, func(e Entry) bool { return e.ACE.SID == userSID }); !m.CanRename(lowToken, proj+`\.git`, proj+`\.git-old`) {
		t.Error("without the user-SID FILE_DELETE_CHILD guard .git still cannot be renamed aside; the guard test is vacuous")
	}
	if m := without(none, noneE); !m.CanDelete(sandboxToken, docs+`\notes.txt`) {
		t.Error("the Medium token cannot delete outside the roots even under the narrow reading; the token test is vacuous")
	}
}

// A protected path below an ordinary directory of the root is the
// documented residual: that directory can be renamed aside with it, and
// ResidualRisks names it.
func TestIntegrityResidualNested(t *testing.T) {
	nested := proj + `\vendor\lib\.git`
	pol := policytest.Edit(scenePolicy(), func(f *policytest.Fields) {
		f.Protected = append(f.Protected, policy.Protected{Path: nested, Kind: policy.Dir, Root: proj})
	})
	m := scene()
	m.Put(proj+`\vendor`, true)
	m.Put(proj+`\vendor\lib`, true)
	m.Put(nested, true)
	m.WriteMask = GenericWriteOnly
	pl := PlanFor(pol, wsSID)
	pl.Merge(IntegrityPlan(pol, userSID))
	m.ApplyPlan(pl)
	if m.CanRename(lowToken, nested, proj+`\vendor\lib\git-old`) {
		t.Error("nested .git itself can be renamed aside")
	}
	if !m.CanRename(lowToken, proj+`\vendor`, proj+`\vendor2`) {
		t.Error("model says vendor cannot be moved; then ResidualRisks overstates")
	}
	risks := ResidualRisks(pol)
	if len(risks) != 1 || !strings.Contains(risks[0], nested) {
		t.Errorf("ResidualRisks = %q, want one entry naming %s", risks, nested)
	}
	if r := ResidualRisks(scenePolicy()); len(r) != 0 {
		t.Errorf("ResidualRisks for top-level protected paths = %q, want none", r)
	}
}

func TestLabelSDDL(t *testing.T) {
	for _, c := range []struct {
		l    Label
		sddl string
	}{
		{RootLabel, "(ML;OICI;NW;;;LW)"},
		{ProtectedLabel, "(ML;OICI;NW;;;ME)"},
		{ProtectedFileLabel, "(ML;;NW;;;ME)"},
		{Label{Level: 0x1000, Policy: NoWriteUp | NoReadUp}, "(ML;;NWNR;;;LW)"},
	} {
		if got := c.l.SDDL(); got != c.sddl {
			t.Errorf("%+v.SDDL() = %q, want %q", c.l, got, c.sddl)
		}
		got, ok := ParseLabel("S:AI" + c.sddl)
		if !ok || got != c.l {
			t.Errorf("ParseLabel(%q) = %+v, %v", c.sddl, got, ok)
		}
	}
	if l, ok := ParseLabel("S:(AU;SA;FA;;;WD)(ML;OICIID;NW;;;S-1-16-4096)"); !ok || l.Level != LowIL || l.Flags != ObjectInherit|ContainerInherit|Inherited {
		t.Errorf("inherited label parsed as %+v, %v", l, ok)
	}
	for _, bad := range []string{"", "D:(A;;FA;;;WD)", "S:", "S:(ML;;XX;;;LW)", "S:(ML;;NW;;;S-1-5-18)"} {
		if l, ok := ParseLabel(bad); ok {
			t.Errorf("ParseLabel(%q) = %+v, want none", bad, l)
		}
	}
}

// [MS-DTYP] 2.5.3.3: below the object's level, NO_WRITE_UP leaves only
// read and execute; at or above it nothing is taken away.
func TestMandatoryAllowed(t *testing.T) {
	med := Label{Level: MediumIL, Policy: NoWriteUp}
	for _, c := range []struct {
		il      uint32
		l       Label
		desired uint32
		want    bool
	}{
		{LowIL, med, FileGenericRead, true},
		{LowIL, med, FileGenericExecute, true},
		{LowIL, med, FileWriteData, false},
		{LowIL, med, Delete, false},
		{LowIL, med, FileDeleteChild, false},
		{LowIL, med, WriteDAC, false},
		{LowIL, med, WriteOwner, false},
		{MediumIL, med, Delete, true},
		{LowIL, RootLabel, Delete | FileDeleteChild | FileWriteData, true},
		{LowIL, Label{Level: MediumIL, Policy: NoWriteUp | NoReadUp}, FileReadData, false},
		{LowIL, Label{Level: MediumIL}, FileWriteData, true},
	} {
		if got := c.desired&^mandatoryAllowed(c.il, c.l) == 0; got != c.want {
			t.Errorf("IL %#x on %v, desired %#x: allowed = %v, want %v", c.il, c.l, c.desired, got, c.want)
		}
	}
}

// Item: ACEs persist, so with one SID for every workspace a run in proj
// could write a workspace granted last week. With a SID per root and only
// this run's SIDs in the token it cannot.
func TestRootSIDsIsolateWorkspaces(t *testing.T) {
	other := `C:\Users\u\src\other`
	lastWeek := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: other, WritableRoots: []string{other}})
	sids := map[string]string{Key(other): "S-1-5-21-9-9-9-1", Key(temp): "S-1-5-21-9-9-9-2", Key(proj): "S-1-5-21-9-9-9-3", Key(wt): "S-1-5-21-9-9-9-4"}
	perRoot := func(r string) string { return sids[Key(r)] }
	for _, c := range []struct {
		name  string
		sidOf func(string) string
		want  bool
	}{
		{"one shared SID (the old recipe)", func(string) string { return wsSID }, true},
		{"a SID per root", perRoot, false},
	} {
		m := scene()
		m.Put(other, true)
		m.Put(other+`\x.txt`, false)
		m.ApplyPlan(PlanForRoots(lastWeek, c.sidOf))
		pol := scenePolicy()
		m.ApplyPlan(PlanForRoots(pol, c.sidOf))
		var runSIDs []string
		for _, r := range pol.WritableRoots() {
			if s := c.sidOf(r); !slices.Contains(runSIDs, s) {
				runSIDs = append(runSIDs, s)
			}
		}
		tok := SandboxToken(userToken.SIDs, logonSID, runSIDs...)
		if got := m.CanWrite(tok, other+`\x.txt`); got != c.want {
			t.Errorf("%s: write the other workspace = %v, want %v", c.name, got, c.want)
		}
		for _, r := range policyTable {
			if got := r.can(m, tok); got != r.want {
				t.Errorf("%s: %s = %v, want %v", c.name, r.name, got, r.want)
			}
		}
	}
}

// A missing protected path read as a file (.mcp.json, which agents parse
// as JSON) gets an empty placeholder file, never a directory, with a
// file's deny and label; the command can neither write, delete, rename
// nor replace it.
func TestMissingFilePlaceholder(t *testing.T) {
	mcp := proj + `\.mcp.json`
	pol := policytest.Edit(scenePolicy(), func(f *policytest.Fields) {
		f.Protected = append(f.Protected, policy.Protected{Path: mcp, Kind: policy.Missing, Root: proj, FileWhenMissing: true})
	})
	for name, pl := range map[string]Plan{"PlanFor": PlanFor(pol, wsSID), "IntegrityPlan": IntegrityPlan(pol, userSID)} {
		if slices.ContainsFunc(pl.Mkdirs, func(p string) bool { return SamePath(p, mcp) }) {
			t.Errorf("%s: %s is a directory placeholder", name, mcp)
		}
		if !slices.ContainsFunc(pl.Files, func(f FilePlaceholder) bool { return SamePath(f.Path, mcp) && f.Content == "" }) {
			t.Errorf("%s: no empty placeholder file for %s: %+v", name, mcp, pl.Files)
		}
		for _, e := range pl.Entries {
			if SamePath(e.Path, mcp) && (!e.ACE.Deny || e.ACE.Flags != 0) {
				t.Errorf("%s: %s gets %+v, want a deny without inheritance flags", name, mcp, e.ACE)
			}
		}
		for _, l := range pl.Labels {
			if SamePath(l.Path, mcp) && l.Label != ProtectedFileLabel {
				t.Errorf("%s: %s labelled %v, want the file label", name, mcp, l.Label)
			}
		}
	}
	m := scene()
	m.ApplyPlan(PlanFor(pol, wsSID))
	if o := m.Get(mcp); o == nil || o.Dir {
		t.Fatalf("after the plan, %s is %+v, want a file", mcp, o)
	}
	for _, r := range []row{
		{"write the .mcp.json placeholder", write(mcp), false},
		{"delete the .mcp.json placeholder", del(mcp), false},
		{"rename the .mcp.json placeholder aside", rename(mcp, proj+`\m.json`), false},
		{"replace the .mcp.json placeholder by rename", rename(proj+`\src\main.go`, mcp), false},
		{"write in workspace", write(proj + `\src\main.go`), true},
	} {
		if got := r.can(m, sandboxToken); got != r.want {
			t.Errorf("sandbox token: %s = %v, want %v", r.name, got, r.want)
		}
	}
}
