package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/winapi"
)

// readGrantMutex is held by the one background read-grant pass; a second
// setup run while it works does not start another.
const readGrantMutex = `Global\agentbox-read-grant`

// listDirs returns the names of dir's entries (files and directories);
// reparse points are skipped so the plan never follows a junction out of
// the profile.
func listDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 || e.Type()&os.ModeIrregular != 0 {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

// readGrants applies the read-grant plan for the sandbox group. Each path
// is recorded in the grants file before its DACL is written, so cleanup
// finds it even if this pass is killed half-way. A root already readable
// costs one DACL read and no tree walk.
func runReadGrants(ctx context.Context, base, profile string, roots []string, groupSID string, st acl.Store, out io.Writer) error {
	plan, err := PlanReadGrants(profile, roots, listDirs)
	if err != nil {
		fmt.Fprintf(out, "read grants: %v (continuing with what could be listed)\n", err)
	}
	g, err := readGrants(base)
	if err != nil {
		return err
	}
	g.Done = false
	gpath := filepath.Join(base, GrantsFile)
	var errs []error
	start := time.Now()
	for i, gr := range plan {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sddl, err := st.GetDACL(gr.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := acl.ParseDACL(sddl)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", gr.Path, err))
			continue
		}
		if Readable(d, gr, groupSID) {
			fmt.Fprintf(out, "[%d/%d] %s: already readable\n", i+1, len(plan), gr.Path)
			continue
		}
		if g.Add(gr.Path) {
			if err := writeJSON(gpath, g); err != nil {
				return fmt.Errorf("recording granted paths: %w", err)
			}
		}
		if _, err := d.Add(gr.ACE(groupSID)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", gr.Path, err))
			continue
		}
		t := time.Now()
		if err := st.SetDACL(gr.Path, d.String(), d.Protected()); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "[%d/%d] %s: granted read (%v)\n", i+1, len(plan), gr.Path, time.Since(t).Round(time.Millisecond))
	}
	g.Done = true
	if err := writeJSON(gpath, g); err != nil {
		errs = append(errs, err)
	}
	fmt.Fprintf(out, "read grants: done in %v, %d error(s)\n", time.Since(start).Round(time.Millisecond), len(errs))
	return errors.Join(errs...)
}

// readGrantPass is agentbox-setup in ModeReadGrant: the background pass,
// single-instance through a named mutex, logging to the progress file.
func readGrantPass(ctx context.Context, base string, p *Payload) error {
	name := windows.StringToUTF16Ptr(readGrantMutex)
	m, err := windows.CreateMutex(nil, true, name)
	if errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
		windows.CloseHandle(m)
		return nil // another pass is at work
	}
	if err != nil {
		return os.NewSyscallError("CreateMutex", err)
	}
	defer windows.CloseHandle(m)
	mk, err := readMarker(base)
	if err != nil || mk == nil {
		return fmt.Errorf("read grants need a completed setup: %w", errors.Join(err, ErrMissing))
	}
	f, err := os.OpenFile(filepath.Join(base, ProgressLog), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	roots := append(SystemReadRoots(os.Getenv), p.ExtraReadRoots...)
	return runReadGrants(ctx, base, p.Profile, roots, mk.GroupSID, winapi.FileStore{}, f)
}
