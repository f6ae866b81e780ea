package gitguard

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
)

// Guard is one run's part in the checks of what sandboxed commands leave
// behind in writable roots (see [window] and [scan]). [Begin] it before
// the command starts; [Guard.End] it once the command's whole tree is
// gone. The rule it enforces: nothing a sandboxed command writes may be
// run or obeyed by the user's git afterwards, in any repository at any
// depth; what cannot be moved out of git's sight fails the run.
type Guard struct {
	reg   string // agentbox's state directory
	roots []string
	keys  []string
	holds []*lockFile
	notes []string
}

// Roots are the directories a policy's checks cover: its writable roots,
// less those inside another (one walk covers both), and less the host's
// /tmp and $TMPDIR that share_slash_tmp shares (the user chose to share
// them as they are, with everything else a command may leave there; and
// every run on the machine would walk them); and the host directories
// that stand in for a private /tmp and $TMPDIR. Those last live on,
// readable, in agentbox's state directory, and the command can learn
// their host path (/proc/self/mountinfo): a repository planted in its
// /tmp would otherwise wait there for the user's git, lured by a symlink
// in the workspace.
func Roots(p *policy.Policy) []string {
	if p.Mode() != policy.WorkspaceWrite {
		return nil
	}
	var out []string
	shared := p.SharedTemps()
	rs := p.WritableRoots()
	for _, t := range p.PrivateTemps() {
		if t.Dir != "" && filepath.IsAbs(t.Dir) && !slices.Contains(rs, t.Dir) {
			rs = append(rs, filepath.Clean(t.Dir))
		}
	}
	slices.SortFunc(rs, func(a, b string) int { return len(a) - len(b) }) // parents before their children
	for _, r := range rs {
		if slices.Contains(shared, r) {
			continue
		}
		inside := false
		for _, o := range out {
			if fspath.Within(r, o) {
				inside = true
			}
		}
		if !inside {
			out = append(out, r)
		}
	}
	return out
}

// Begin opens (or joins) the window of each of p's roots. state is
// agentbox's state directory; nil and no error when p writes nowhere.
// Its error means the guard cannot work (no state directory, or a
// killed run's leftovers that cannot be moved aside): the command must
// not run.
func Begin(p *policy.Policy, state string) (*Guard, error) {
	roots := Roots(p)
	if len(roots) == 0 {
		return nil, nil
	}
	r, err := openRegistry(state)
	if err != nil {
		return nil, err
	}
	defer r.close()
	g := &Guard{reg: state, roots: roots}
	// The window starts before the check of killed runs' windows below:
	// what a straggler of theirs changes during that check, behind the
	// walk, is this window's to find.
	now := coarseNow().UnixNano()
	// Windows nobody holds: their last run was killed before its
	// check. Check them now, before this run can add to them.
	all, err := r.all()
	if err != nil {
		return nil, err
	}
	var stale []openWindow
	for _, w := range all {
		if !w.held && overlapsAny(w.w.Root, roots) {
			stale = append(stale, w)
		}
	}
	if len(stale) > 0 {
		notes, err := r.settle(state, stale, all)
		g.notes = append(g.notes, notes...)
		if err != nil {
			return nil, fmt.Errorf("an earlier agentbox run was killed before it checked what its command left behind, and that check failed now: %w", err)
		}
		if all, err = r.all(); err != nil {
			return nil, err
		}
	}
	for _, root := range roots {
		key := windowKey(root)
		skip, guarded := readOnlyIn(p, root), guardedIn(p, root)
		w, ok, err := r.load(key)
		if err != nil {
			g.release()
			return nil, err
		}
		if !ok {
			w = window{Root: root, Since: now, Skip: skip, Guarded: guarded}
		} else {
			w.Skip = intersect(w.Skip, skip)
			w.Guarded = intersect(w.Guarded, guarded)
		}
		// Another root's run may have written these git directories
		// already: a baseline read now could hold its plants.
		tainted := slices.ContainsFunc(all, func(o openWindow) bool { return o.key != key && o.held && overlaps(o.w.Root, root) })
		for _, gd := range writableGitDirs(p, root) {
			if !slices.ContainsFunc(w.Own, func(b Baseline) bool { return b.GitDir == gd }) {
				b := Baseline{GitDir: gd, Exposed: true}
				if !tainted {
					b = newBaseline(gd)
				}
				w.Own = append(w.Own, b)
			}
		}
		for i, b := range w.Own {
			if !slices.Contains(guarded, b.GitDir) {
				w.Own[i].Exposed = true // this run may write it unguarded
			}
		}
		for i, o := range all {
			if o.key == key || !o.held || !overlaps(o.w.Root, root) {
				continue
			}
			// Runs of both windows write both: each check must count
			// what the other's runs could do.
			w.narrow(o.w)
			changed := all[i].w.narrow(w)
			if o.w.Since < w.Since {
				w.Since = o.w.Since
			} else if w.Since < o.w.Since {
				all[i].w.Since = w.Since
				changed = true
			}
			if changed {
				if err := r.store(o.key, all[i].w); err != nil {
					g.release()
					return nil, err
				}
			}
		}
		hold, err := openLock(r.d, key+".lock")
		if err == nil {
			var ok bool
			if ok, err = hold.try(false); err == nil && !ok {
				err = errors.New("held exclusively outside the registry lock")
			}
			if err != nil {
				hold.close()
			}
		}
		if err == nil {
			err = r.store(key, w)
			if err != nil {
				hold.close()
			}
		}
		if err != nil {
			g.release()
			return nil, fmt.Errorf("opening the check window of %s: %w", root, err)
		}
		g.keys = append(g.keys, key)
		g.holds = append(g.holds, hold)
	}
	return g, nil
}

// Notes are what Begin moved aside on behalf of killed runs.
func (g *Guard) Notes() []string {
	if g == nil {
		return nil
	}
	return g.notes
}

func (g *Guard) release() {
	for _, h := range g.holds {
		h.close()
	}
	g.holds = nil
}

// End lets go of the run's windows; for each it was the last run of, it
// checks the root. notes say what was moved aside; an error says what
// could not be, and the run must fail.
func (g *Guard) End() (notes []string, err error) {
	if g == nil {
		return nil, nil
	}
	r, err := openRegistry(g.reg)
	g.release() // after the registry is ours: no run can join meanwhile
	if err != nil {
		return nil, err
	}
	defer r.close()
	all, err := r.all()
	if err != nil {
		return nil, err
	}
	var due []openWindow
	for _, w := range all {
		if !w.held && overlapsAny(w.w.Root, g.roots) {
			due = append(due, w) // ours, or a killed run's of the same tree
		}
	}
	return r.settle(g.reg, due, all)
}

// settle checks the windows due (which nobody holds any more) and drops
// their records. A window inside another that some run still holds is
// left to that one's check, which started no later; one inside another
// due window is covered by that one's walk.
func (r *registry) settle(state string, due, all []openWindow) (notes []string, err error) {
	slices.SortFunc(due, func(a, b openWindow) int { return len(a.w.Root) - len(b.w.Root) })
	var walked []openWindow
	var errs []error
	var q *quarantine
	for _, w := range due {
		deferred := false
		for i, o := range all {
			if !o.held || o.key == w.key || !fspath.Within(w.w.Root, o.w.Root) {
				continue
			}
			if !deferred && len(w.w.Own) > 0 {
				// That window's walk covers this root; its baselines
				// go with it, for that check to repair them.
				for _, b := range w.w.Own {
					if !slices.ContainsFunc(o.w.Own, func(c Baseline) bool { return c.GitDir == b.GitDir }) {
						all[i].w.Own = append(all[i].w.Own, b)
					}
				}
				all[i].w.narrow(w.w)
				if err := r.store(o.key, all[i].w); err != nil {
					return nil, fmt.Errorf("handing the check of %s to the run of %s still going: %w", w.w.Root, o.w.Root, err)
				}
			}
			deferred = true
		}
		for i, o := range walked {
			if fspath.Within(w.w.Root, o.w.Root) {
				// Covered by that walk, but its baselines are this
				// window's own to check.
				if w.w.Since < o.w.Since {
					walked[i].w.Since = w.w.Since
				}
				walked[i].w.Own = append(walked[i].w.Own, w.w.Own...)
				deferred = true
			}
		}
		if !deferred {
			walked = append(walked, w)
		}
	}
	for _, w := range walked {
		if q == nil {
			sd, err := openOrMake(filepath.Join(state, "quarantine"))
			if err != nil {
				return nil, fmt.Errorf("opening agentbox's quarantine directory: %w", err)
			}
			defer sd.close()
			if q, err = newQuarantine(sd); err != nil {
				return nil, err
			}
		}
		s := &scan{since: time.Unix(0, w.w.Since), skip: map[string]bool{}, own: map[string]bool{}, q: q}
		for _, p := range w.w.Skip {
			s.skip[p] = true
		}
		for _, o := range all {
			if o.held && o.key != w.key && fspath.Within(o.w.Root, w.w.Root) {
				s.skip[o.w.Root] = true
			}
		}
		for _, b := range w.w.Own {
			// An exposed one is also checked as any nested repository.
			s.own[b.GitDir] = !b.Exposed
		}
		wt := watcherFor(w.w.Root)
		if dirty, ok := wt.dirtySince(w.w.Since); ok {
			s.sparse, s.dirty, s.anc = true, dirty, ancestors(dirty, w.w.Root)
		}
		s.check(w.w)
		if s.needFull {
			// The sparse pass met something the watcher cannot see
			// whole: walk everything (what it moved is gone already).
			s.sparse = false
			s.check(w.w)
		}
		if scanTrace != nil {
			scanTrace(w.w.Root, s.sparse, s.dirs)
		}
		notes = append(notes, s.notes...)
		errs = append(errs, s.errs...)
	}
	if q != nil {
		if err := q.close(); err != nil {
			errs = append(errs, fmt.Errorf("recording what agentbox moved aside: %w", err))
		}
	}
	if len(errs) > 0 {
		// Records stay: the next run checks again.
		return notes, errors.Join(errs...)
	}
	for _, w := range due {
		r.drop(w.key)
		if wt := watcherFor(w.w.Root); wt != nil {
			// No window of this root is open now; one opened next
			// starts no earlier than this (less the coarse clock's lag).
			wt.forget(time.Now().Add(-time.Second).UnixNano())
		}
	}
	return notes, nil
}

// scanTrace, when a test sets it, hears of each root a check looked at:
// whether its last pass was sparse, and how many directories it opened.
var scanTrace func(root string, sparse bool, dirs int)

// check is one pass over a window's root: its own git directories, then
// the tree.
func (s *scan) check(w window) {
	for _, b := range w.Own {
		s.rootGit(b)
	}
	s.root(w.Root)
}

// ancestors are the directories from root down to each of dirty's
// parents, which a sparse walk passes through.
func ancestors(dirty map[string]bool, root string) map[string]bool {
	anc := map[string]bool{}
	for d := range dirty {
		for p := filepath.Dir(d); fspath.Within(p, root) && !anc[p]; p = filepath.Dir(p) {
			anc[p] = true
			if p == root {
				break
			}
		}
	}
	return anc
}

func overlapsAny(root string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return overlaps(r, root) })
}

// readOnlyIn are the paths inside root that p keeps read-only whole: the
// protected paths but the git directories allow_git_writes opens.
func readOnlyIn(p *policy.Policy, root string) []string {
	if p.AllowDegraded() {
		return nil // see guardedIn
	}
	var out []string
	for _, pr := range p.Protected() {
		if !fspath.Within(pr.Path, root) || pr.Path == root || pr.Kind == policy.Missing {
			continue
		}
		if p.AllowGitWrites() && WritableDir(pr) {
			continue
		}
		out = append(out, pr.Path)
	}
	return out
}

// guardedIn are the paths inside root that p keeps read-only whole or
// whose git-running files it keeps read-only: none when the run may go
// degraded (allow_degraded: without user namespaces, Landlock cannot
// keep anything inside a writable root read-only, and the run decides
// that only once it starts).
func guardedIn(p *policy.Policy, root string) []string {
	if p.AllowDegraded() {
		return nil
	}
	return append(readOnlyIn(p, root), writableGitDirs(p, root)...)
}

// writableGitDirs are the git directories inside root that
// allow_git_writes lets p's command write.
func writableGitDirs(p *policy.Policy, root string) []string {
	if !p.AllowGitWrites() {
		return nil
	}
	var out []string
	for _, pr := range p.Protected() {
		if fspath.Within(pr.Path, root) && WritableDir(pr) {
			out = append(out, pr.Path)
		}
	}
	return out
}
