package acl

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

const gd = proj + `\.git`

// gitScene is scene() with a realistic .git: hooks, info, objects (with
// objects\info), refs, logs, the index; config.worktree, commondir,
// modules, remotes and branches are missing.
func gitScene() *Model {
	m := scene()
	for _, d := range []string{`\hooks`, `\info`, `\objects`, `\objects\info`, `\objects\ab`, `\refs`, `\refs\heads`, `\logs`} {
		m.Put(gd+d, true)
	}
	for _, f := range []string{`\index`, `\hooks\pre-commit.sample`, `\info\exclude`, `\objects\ab\cdef`, `\refs\heads\main`, `\logs\HEAD`} {
		m.Put(gd+f, false)
	}
	return m
}

func modelStat(m *Model) func(string) (PathInfo, error) {
	return func(p string) (PathInfo, error) {
		o := m.Get(p)
		if o == nil {
			return PathInfo{}, nil
		}
		return PathInfo{Exists: true, Dir: o.Dir}, nil
	}
}

func gitPolicy() *policy.Policy {
	return policytest.Edit(scenePolicy(), func(f *policytest.Fields) { f.AllowGitWrites = true })
}

// unelevatedPlan is what Prepare applies for pol (SIDs, labels, guards),
// with allow_git_writes resolved against m.
func unelevatedPlan(t *testing.T, m *Model, pol *policy.Policy) Plan {
	t.Helper()
	g, err := ResolveGitWrites(pol, modelStat(m))
	if err != nil {
		t.Fatal(err)
	}
	gp := g.Policy(pol)
	sidOf := func(string) string { return wsSID }
	pl := PlanForRoots(gp, sidOf)
	pl.Merge(g.SIDPlan(gp, sidOf))
	pl.Merge(IntegrityPlan(gp, userSID))
	pl.Merge(g.UserPlan(userSID))
	return pl
}

// putting simulates the command creating a file (it then inherits, as a
// new file does) so that the next row can rename it.
func putting(p string, f func(*Model, Token) bool) func(*Model, Token) bool {
	return func(m *Model, t Token) bool {
		if m.Get(p) == nil {
			m.Put(p, false)
		}
		return f(m, t)
	}
}

var gitTable = []row{
	// What add, commit, checkout, stash, reset write.
	{"create index.lock", create(gd), true},
	{"rename index.lock over index", putting(gd+`\index.lock`, rename(gd+`\index.lock`, gd+`\index`)), true},
	{"delete index.lock", putting(gd+`\index.lock`, del(gd+`\index.lock`)), true},
	{"write index", write(gd + `\index`), true},
	{"create object", create(gd + `\objects\ab`), true},
	{"mkdir objects fan-out", mkdir(gd + `\objects`), true},
	{"rename temp object into place", putting(gd+`\objects\ab\tmp_obj`, rename(gd+`\objects\ab\tmp_obj`, gd+`\objects\ab\0123`)), true},
	{"write ref", write(gd + `\refs\heads\main`), true},
	{"create ref lock", create(gd + `\refs\heads`), true},
	{"rename ref lock over ref", putting(gd+`\refs\heads\main.lock`, rename(gd+`\refs\heads\main.lock`, gd+`\refs\heads\main`)), true},
	{"write HEAD", write(gd + `\HEAD`), true},
	{"rename HEAD.lock over HEAD", putting(gd+`\HEAD.lock`, rename(gd+`\HEAD.lock`, gd+`\HEAD`)), true},
	{"write logs", write(gd + `\logs\HEAD`), true},
	{"mkdir refs\\stash dir", mkdir(gd + `\refs`), true},
	{"read config", read(gd + `\config`), true},

	// What stays read-only.
	{"write config", write(gd + `\config`), false},
	{"delete config", del(gd + `\config`), false},
	{"rename config aside", rename(gd+`\config`, gd+`\config.bak`), false},
	{"rename lock over config", putting(gd+`\config.lock`, rename(gd+`\config.lock`, gd+`\config`)), false},
	{"write config.worktree placeholder", write(gd + `\config.worktree`), false},
	{"delete config.worktree placeholder", del(gd + `\config.worktree`), false},
	{"rename over config.worktree", putting(gd+`\x.lock`, rename(gd+`\x.lock`, gd+`\config.worktree`)), false},
	{"write commondir placeholder", write(gd + `\commondir`), false},
	{"delete commondir placeholder", del(gd + `\commondir`), false},
	{"rename over commondir", putting(gd+`\x.lock`, rename(gd+`\x.lock`, gd+`\commondir`)), false},
	{"plant a hook", create(gd + `\hooks`), false},
	{"write hook", write(gd + `\hooks\pre-commit.sample`), false},
	{"delete hook", del(gd + `\hooks\pre-commit.sample`), false},
	{"move file into hooks", putting(gd+`\x.lock`, rename(gd+`\x.lock`, gd+`\hooks\pre-commit`)), false},
	{"rename hooks aside", rename(gd+`\hooks`, gd+`\hooks.old`), false},
	{"delete hooks", del(gd + `\hooks`), false},
	{"create in info", create(gd + `\info`), false},
	{"write info\\exclude", write(gd + `\info\exclude`), false},
	{"rename info aside", rename(gd+`\info`, gd+`\info.old`), false},
	{"create objects\\info\\alternates", create(gd + `\objects\info`), false},
	{"rename objects\\info aside", rename(gd+`\objects\info`, gd+`\objects\info2`), false},
	{"rename objects aside", rename(gd+`\objects`, gd+`\objects.old`), false},
	{"create in modules placeholder", mkdir(gd + `\modules`), false},
	{"create in remotes placeholder", create(gd + `\remotes`), false},
	{"create in branches placeholder", create(gd + `\branches`), false},
	{"rename modules placeholder aside", rename(gd+`\modules`, gd+`\m`), false},
	{"write linked worktree's gitdir", write(gd + `\worktrees\wt\HEAD`), false},
	{"create in worktrees", create(gd + `\worktrees`), false},
	{"rename .git aside", rename(gd, proj+`\.git-old`), false},
	{"delete .git", del(gd), false},
	{"rename .git into src", rename(gd, proj+`\src\.git`), false},
	{"write worktree .git file", write(wt + `\.git`), false},
	{"write .codex", write(proj + `\.codex\config.toml`), false},
}

// With allow_git_writes, git's own writes pass and every read-only git
// path stays closed, for both readings of "write access", whether .git
// was fresh or protected whole by an earlier run without the setting.
func TestGitWritesTable(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		for _, mask := range []uint32{GenericWriteOnly, WriteAccess} {
			m := gitScene()
			m.WriteMask = mask
			if earlier {
				m.ApplyPlan(unelevatedPlan(t, m, scenePolicy()))
			}
			m.ApplyPlan(unelevatedPlan(t, m, gitPolicy()))
			for _, r := range gitTable {
				if got := r.can(m, lowToken); got != r.want {
					t.Errorf("earlier run %v, mask %#x: %s = %v, want %v", earlier, mask, r.name, got, r.want)
				}
			}
			// The rest of the workspace table is unchanged (rows
			// about .git aside: they are the ones the setting opens).
			for _, r := range policyTable {
				if strings.Contains(r.name, ".git") && !strings.Contains(r.name, "worktree") || r.name == "write world-writable dir (limitation)" || r.name == "delete workspace root" {
					continue
				}
				if got := r.can(m, lowToken); got != r.want {
					t.Errorf("earlier run %v, mask %#x: %s = %v, want %v", earlier, mask, r.name, got, r.want)
				}
			}
		}
	}
}

// The placeholders: missing read-only files get a file git reads as
// absent, missing directories an empty directory; existing ones none.
func TestGitWritesPlaceholders(t *testing.T) {
	m := gitScene()
	g, err := ResolveGitWrites(gitPolicy(), modelStat(m))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.GitDirs) != 1 || g.GitDirs[0] != gd {
		t.Fatalf("GitDirs = %q, want [%s]", g.GitDirs, gd)
	}
	want := []FilePlaceholder{{gd + `\config.worktree`, ""}, {gd + `\commondir`, "."}}
	if !reflect.DeepEqual(g.Files, want) {
		t.Errorf("Files = %q, want %q", g.Files, want)
	}
	pl := unelevatedPlan(t, m, gitPolicy())
	for _, d := range []string{`\modules`, `\remotes`, `\branches`} {
		if !containsPath(pl.Mkdirs, gd+d) {
			t.Errorf("Mkdirs %q lacks %s", pl.Mkdirs, gd+d)
		}
	}
	for _, d := range []string{`\hooks`, `\info`, `\objects\info`, `\worktrees`, `\config`} {
		if containsPath(pl.Mkdirs, gd+d) {
			t.Errorf("Mkdirs has existing %s", gd+d)
		}
	}
	if g.Guarded[0] != gd || !containsPath(g.Guarded, gd+`\objects`) || len(g.Guarded) != 2 {
		t.Errorf("Guarded = %q, want .git and objects", g.Guarded)
	}
	// Without objects the whole missing objects is guarded.
	m2 := gitScene()
	delete(m2.Objects, Key(gd+`\objects\info`))
	delete(m2.Objects, Key(gd+`\objects`))
	g2, _ := ResolveGitWrites(gitPolicy(), modelStat(m2))
	if !hasCarveout(g2.Carveouts, gd+`\objects`, policy.Missing) {
		t.Errorf("carveouts %+v lack the missing objects directory", g2.Carveouts)
	}
}

func hasCarveout(cs []policy.Protected, p string, k policy.ProtectedKind) bool {
	for _, c := range cs {
		if SamePath(c.Path, p) && c.Kind == k {
			return true
		}
	}
	return false
}

func containsPath(ps []string, p string) bool {
	for _, x := range ps {
		if SamePath(x, p) {
			return true
		}
	}
	return false
}

// Without allow_git_writes (or outside workspace-write) nothing changes.
func TestGitWritesOffPlanUnchanged(t *testing.T) {
	m := gitScene()
	pol := scenePolicy()
	g, err := ResolveGitWrites(pol, modelStat(m))
	if err != nil || !reflect.DeepEqual(g, GitPlan{}) {
		t.Fatalf("ResolveGitWrites without the setting = %+v, %v", g, err)
	}
	if g.Policy(pol) != pol {
		t.Error("Policy copied the policy")
	}
	plain := PlanForRoots(pol, func(string) string { return wsSID })
	plain.Merge(IntegrityPlan(pol, userSID))
	if got := unelevatedPlan(t, m, pol); !reflect.DeepEqual(got, plain) {
		t.Errorf("plan without allow_git_writes changed:\n got %+v\nwant %+v", got, plain)
	}
	ro := policytest.Edit(gitPolicy(), func(f *policytest.Fields) { f.Mode = policy.ReadOnly })
	if g, _ := ResolveGitWrites(ro, modelStat(m)); len(g.GitDirs) != 0 {
		t.Errorf("read-only policy opened %q", g.GitDirs)
	}
	// A placeholder .git (no HEAD) stays protected whole.
	m.Put(temp+`\.git`, true)
	if g, _ := ResolveGitWrites(gitPolicy(), modelStat(m)); len(g.GitDirs) != 1 {
		t.Errorf("GitDirs = %q, want only the repository", g.GitDirs)
	}
}

// Each addition is load-bearing: without GitDirGuard .git (and objects)
// can be renamed aside under the narrow reading; without the removal of an
// earlier run's deny and label, git cannot write.
func TestGitWritesPartsNeeded(t *testing.T) {
	m := gitScene()
	m.WriteMask = GenericWriteOnly
	pl := unelevatedPlan(t, m, gitPolicy())
	var noGuard Plan
	noGuard.Merge(pl)
	noGuard.Entries = nil
	for _, e := range pl.Entries {
		if e.ACE != GitDirGuard(userSID) {
			noGuard.Entries = append(noGuard.Entries, e)
		}
	}
	m.ApplyPlan(noGuard)
	if !m.CanRename(lowToken, gd, proj+`\.git-old`) || !m.CanRename(lowToken, gd+`\objects`, gd+`\o`) {
		t.Error("without GitDirGuard .git and objects still cannot be renamed aside; the guard test is vacuous")
	}

	m = gitScene()
	m.ApplyPlan(unelevatedPlan(t, m, scenePolicy()))
	pl = unelevatedPlan(t, m, gitPolicy())
	pl.Remove, pl.Unlabel = nil, nil
	m.ApplyPlan(pl)
	if m.CanCreate(lowToken, gd, false) {
		t.Error("without Remove/Unlabel git can still write after a protected run; the test is vacuous")
	}
}

// The user's own (Medium, unrestricted) token keeps what git and the user
// do: write config, replace the index, delete inside .git.
func TestGitWritesUserAccess(t *testing.T) {
	m := gitScene()
	m.ApplyPlan(unelevatedPlan(t, m, gitPolicy()))
	for _, r := range []row{
		{"write config", write(gd + `\config`), true},
		{"rename lock over config", putting(gd+`\config.lock`, rename(gd+`\config.lock`, gd+`\config`)), true},
		{"plant hook", create(gd + `\hooks`), true},
		{"delete hook", del(gd + `\hooks\pre-commit.sample`), true},
		{"rename index.lock over index", putting(gd+`\index.lock`, rename(gd+`\index.lock`, gd+`\index`)), true},
		// The footprint: .git and objects themselves cannot be
		// renamed until agentbox cleanup.
		{"rename .git", rename(gd, proj+`\.git-old`), false},
	} {
		if got := r.can(m, userToken); got != r.want {
			t.Errorf("user token: %s = %v, want %v", r.name, got, r.want)
		}
	}
}

func TestGitWritesRefusesLinks(t *testing.T) {
	m := gitScene()
	stat := func(p string) (PathInfo, error) {
		i, _ := modelStat(m)(p)
		if SamePath(p, gd+`\hooks`) {
			i.Link = true
		}
		return i, nil
	}
	if _, err := ResolveGitWrites(gitPolicy(), stat); err == nil || !strings.Contains(err.Error(), "hooks is a link") {
		t.Errorf("link hooks: err = %v", err)
	}
}

// fileLabelStore is labelStore that can create placeholder files.
type fileLabelStore struct {
	labelStore
	files map[string]string
}

func (m *fileLabelStore) CreateFile(p string, content []byte) error {
	if _, ok := m.dacl[Key(p)]; ok {
		return fs.ErrExist
	}
	m.dacl[Key(p)] = "D:AI(A;OICIID;FA;;;SY)"
	m.files[Key(p)] = string(content)
	return nil
}

// On disk: a run with allow_git_writes after one without takes .git's
// deny and Medium label off, creates the file placeholders once, and a
// second run writes nothing; cleanup's RevokeUserGuards removes the
// GitDirGuard and keeps the user's own DELETE|FILE_DELETE_CHILD deny.
func TestApplyGitWrites(t *testing.T) {
	m := gitScene()
	st := &fileLabelStore{labelStore: labelStore{memStore: memStore{dacl: map[string]string{}}, label: map[string]string{}}, files: map[string]string{}}
	for k := range m.Objects {
		st.dacl[k] = "D:AI(A;OICIID;FA;;;SY)"
	}
	if _, err := Apply(st, unelevatedPlan(t, m, scenePolicy())); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.dacl[Key(gd)], "(D;OICI;") || !strings.Contains(st.label[Key(gd)], ";ME)") {
		t.Fatalf("protected .git: DACL %s, label %s", st.dacl[Key(gd)], st.label[Key(gd)])
	}
	pl := unelevatedPlan(t, m, gitPolicy())
	r, err := Apply(st, pl)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(st.dacl[Key(gd)], "(D;OICI;") || st.label[Key(gd)] != "S:" {
		t.Errorf(".git still protected: DACL %s, label %q", st.dacl[Key(gd)], st.label[Key(gd)])
	}
	if !strings.Contains(st.dacl[Key(gd)], GitDirGuard(userSID).SDDL()) {
		t.Errorf(".git lacks the GitDirGuard: %s", st.dacl[Key(gd)])
	}
	if len(r.Files) != 2 || st.files[Key(gd+`\commondir`)] != "." {
		t.Errorf("files created %+v, commondir %q", r.Files, st.files[Key(gd+`\commondir`)])
	}
	if !strings.Contains(st.label[Key(gd+`\hooks`)], ";ME)") || !strings.Contains(st.label[Key(gd+`\commondir`)], ";ME)") {
		t.Errorf("hooks label %q, commondir label %q", st.label[Key(gd+`\hooks`)], st.label[Key(gd+`\commondir`)])
	}
	n := len(st.sets) + len(st.labelSets)
	if r2, err := Apply(st, pl); err != nil || len(r2.Modified)+len(r2.Labeled)+len(r2.Files) != 0 || len(st.sets)+len(st.labelSets) != n {
		t.Errorf("second run changed %+v, %v", r2, err)
	}
	own := "(D;;0x10040;;;" + userSID + ")"
	st.dacl[Key(gd)] += own
	if _, err := RevokeUserGuards(st, []string{gd}, userSID); err != nil {
		t.Fatal(err)
	}
	if d := st.dacl[Key(gd)]; strings.Contains(d, GitDirGuard(userSID).SDDL()) || !strings.Contains(d, own) {
		t.Errorf("after RevokeUserGuards .git DACL = %s", d)
	}
}
