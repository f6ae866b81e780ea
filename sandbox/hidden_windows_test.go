package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

// hiddenTestPolicy is testPolicy with deny_read rules: every .env under
// the workspace and a credentials directory outside it, whose public key
// allow_read re-opens.
func hiddenTestPolicy(t *testing.T, mode policy.Mode) (pol *policy.Policy, creds string) {
	t.Helper()
	_, base := testPolicy(t, mode)
	ws := filepath.Join(base, "workspace")
	creds = filepath.Join(base, "outside", "creds")
	for p, c := range map[string]string{
		filepath.Join(ws, ".env"):         "SECRET",
		filepath.Join(ws, "sub", "a.env"): "SECRET",
		filepath.Join(ws, "main.go"):      "package main",
		filepath.Join(creds, "key"):       "SECRET",
		filepath.Join(creds, "key.pub"):   "PUBLIC",
	} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := policytest.Resolve(policy.Options{Mode: mode, Cwd: ws,
		DenyRead: []string{"**/*.env", creds}, AllowRead: []string{filepath.Join(creds, "key.pub")}},
		func(k string) string {
			if k == "TEMP" || k == "TMP" {
				return ""
			}
			return os.Getenv(k)
		})
	if err != nil {
		t.Fatal(err)
	}
	return pol, creds
}

// TestEnforceHidden: on a real host the Low-integrity command reads no
// hidden file (the NO_READ_UP labels), reads the re-opened one and the
// rest, cannot overwrite a hidden file, and cleanup takes the labels off.
// Wine stores and enforces no labels: there it skips.
func TestEnforceHidden(t *testing.T) {
	requireEnforcement(t)
	for _, mode := range []policy.Mode{policy.WorkspaceWrite, policy.ReadOnly} {
		pol, creds := hiddenTestPolicy(t, mode)
		ws := pol.Cwd()
		for _, c := range []struct {
			name, helper string
			args         []string
			want         bool
		}{
			{"read .env", "read", []string{filepath.Join(ws, ".env")}, false},
			{"read sub\\a.env", "read", []string{filepath.Join(ws, "sub", "a.env")}, false},
			{"read hidden dir's file", "read", []string{filepath.Join(creds, "key")}, false},
			{"read re-opened file", "read", []string{filepath.Join(creds, "key.pub")}, true},
			{"read main.go", "read", []string{filepath.Join(ws, "main.go")}, true},
			{"overwrite .env", "write", []string{filepath.Join(ws, ".env")}, false},
		} {
			if got := sandboxed(t, pol, c.helper, c.args...); got != c.want {
				t.Errorf("%s: %s: succeeded=%v, want %v", mode, c.name, got, c.want)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".env")); string(b) != "SECRET" {
			t.Errorf("%s: host's .env is %q", mode, b)
		}
		var out bytes.Buffer
		if err := Cleanup(context.Background(), &out); err != nil && !strings.Contains(err.Error(), "elevated") {
			t.Fatalf("cleanup: %v", err)
		}
		for _, p := range []string{filepath.Join(ws, ".env"), creds} {
			s, _ := winapi.FileStore{}.GetLabel(p)
			if l, ok := acl.ParseLabel(s); ok && (l == acl.HiddenLabel || l == acl.HiddenFileLabel) {
				t.Errorf("%s: hidden label left on %s after cleanup: %s", mode, p, s)
			}
		}
	}
}

// TestHiddenPlumbing: with hidden paths in the policy a run prepares and
// runs, in both modes (under Wine too, which applies no label: this
// checks the plumbing, not the enforcement, which TestEnforceHidden does
// on a host).
func TestHiddenPlumbing(t *testing.T) {
	for _, mode := range []policy.Mode{policy.WorkspaceWrite, policy.ReadOnly} {
		pol, _ := hiddenTestPolicy(t, mode)
		if len(pol.Hidden()) < 3 {
			t.Fatalf("%s: hidden %v", mode, pol.Hidden())
		}
		if !sandboxed(t, pol, "read", filepath.Join(pol.Cwd(), "main.go")) {
			t.Errorf("%s: a run with hidden paths failed", mode)
		}
	}
}
