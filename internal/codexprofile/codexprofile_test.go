package codexprofile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// parse decodes a config the way package policy does and resolves it.
func parse(t *testing.T, src string) (*Plan, error) {
	t.Helper()
	var c struct {
		DefaultPermissions *string        `toml:"default_permissions"`
		Permissions        map[string]any `toml:"permissions"`
	}
	if err := toml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatalf("toml: %v", err)
	}
	return Resolve(c.DefaultPermissions, c.Permissions)
}

func refs(rs []Ref) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Under("<"+[...]string{"abs", "home", "ws", "tmpdir", "tmp"}[r.Anchor]+">"))
	}
	return out
}

func TestCodexDocumentedExample(t *testing.T) {
	// Codex's own example (its security page): the workspace stays
	// writable and .env files are hidden.
	pl, err := parse(t, `
default_permissions = "workspace"

[permissions.workspace.filesystem]
":project_roots" = { "." = "write", "**/*.env" = "none" }
glob_scan_max_depth = 3
`)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Mode != "workspace-write" || pl.GlobScanMaxDepth != 3 {
		t.Errorf("mode %q depth %d", pl.Mode, pl.GlobScanMaxDepth)
	}
	if got := refs(pl.DenyRead); !reflect.DeepEqual(got, []string{"<ws>/**/*.env"}) {
		t.Errorf("deny %v", got)
	}
	if pl.Tmpdir || pl.SlashTmp || len(pl.WritableRoots) > 0 || pl.Network.On {
		t.Errorf("more than asked: %+v", pl)
	}
}

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		check     func(t *testing.T, pl *Plan)
	}{
		{"builtin read-only", `default_permissions = ":read-only"`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "read-only" || pl.Network.On {
				t.Errorf("%+v", pl)
			}
		}},
		{"builtin workspace", `default_permissions = ":workspace"`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "workspace-write" || !pl.Tmpdir || !pl.SlashTmp {
				t.Errorf("%+v", pl)
			}
		}},
		{"builtin danger", `default_permissions = ":danger-full-access"`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "danger-full-access" {
				t.Errorf("%+v", pl)
			}
		}},
		{"workspace_roots spelling and deny", `
default_permissions = "p"
[permissions.p.filesystem]
":minimal" = "read"
[permissions.p.filesystem.":workspace_roots"]
"." = "write"
"private" = "deny"
"private/**" = "deny"
`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "workspace-write" {
				t.Errorf("mode %s", pl.Mode)
			}
			if got := refs(pl.DenyRead); !reflect.DeepEqual(got, []string{"<ws>/private", "<ws>/private/**"}) {
				t.Errorf("deny %v", got)
			}
		}},
		{"cwd spelling", `
default_permissions = "p"
[permissions.p.filesystem]
":cwd" = "write"
`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "workspace-write" {
				t.Errorf("mode %s", pl.Mode)
			}
		}},
		{"extends workspace, child overrides tmpdir", `
default_permissions = "p"
[permissions.p]
extends = ":workspace"
[permissions.p.filesystem]
":tmpdir" = "read"
":project_roots" = { "**/*.pem" = "none" }
`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "workspace-write" || pl.Tmpdir || !pl.SlashTmp {
				t.Errorf("%+v", pl)
			}
			if got := refs(pl.DenyRead); !reflect.DeepEqual(got, []string{"<ws>/**/*.pem"}) {
				t.Errorf("deny %v", got)
			}
		}},
		{"extends chain", `
default_permissions = "child"
[permissions.base.filesystem]
":project_roots" = { "." = "write" }
"~/.cache/x" = "write"
[permissions.child]
extends = "base"
description = "mine"
[permissions.child.filesystem]
"/srv/secret" = "none"
"/srv/secret/public" = "read"
`, func(t *testing.T, pl *Plan) {
			if got := refs(pl.WritableRoots); !reflect.DeepEqual(got, []string{"<home>/.cache/x"}) {
				t.Errorf("writable %v", got)
			}
			if got := refs(pl.AllowRead); !reflect.DeepEqual(got, []string{"/srv/secret/public"}) {
				t.Errorf("allow %v", got)
			}
		}},
		{"read inside write is read-only", `
default_permissions = "p"
[permissions.p.filesystem]
":project_roots" = { "." = "write", ".github/**" = "read", "lefthook.yml" = "read" }
`, func(t *testing.T, pl *Plan) {
			if got := refs(pl.ReadOnly); !reflect.DeepEqual(got, []string{"<ws>/.github", "<ws>/lefthook.yml"}) {
				t.Errorf("read-only %v", got)
			}
		}},
		{"read re-opens inside a none glob", `
default_permissions = "p"
[permissions.p.filesystem]
":project_roots" = { "." = "write", "**/*.env" = "none", "config/public.env" = "read" }
`, func(t *testing.T, pl *Plan) {
			if got := refs(pl.AllowRead); !reflect.DeepEqual(got, []string{"<ws>/config/public.env"}) {
				t.Errorf("allow %v", got)
			}
		}},
		{"tmp none and root scoped", `
default_permissions = "p"
[permissions.p.filesystem]
":root" = { "." = "read", "etc/shadow" = "none" }
":tmpdir" = "deny"
`, func(t *testing.T, pl *Plan) {
			if pl.Mode != "read-only" {
				t.Errorf("mode %s", pl.Mode)
			}
			if got := refs(pl.DenyRead); !reflect.DeepEqual(got, []string{"/etc/shadow", "<tmpdir>"}) {
				t.Errorf("deny %v", got)
			}
		}},
		{"workspace_roots table", `
default_permissions = "p"
[permissions.p.workspace_roots]
"~/code/lib" = true
"/off" = false
[permissions.p.filesystem]
":workspace_roots" = { "." = "write" }
`, func(t *testing.T, pl *Plan) {
			if got := refs(pl.WorkspaceRoots); !reflect.DeepEqual(got, []string{"<home>/code/lib"}) {
				t.Errorf("roots %v", got)
			}
		}},
		{"network allow-list", `
default_permissions = "p"
[permissions.p.filesystem]
":project_roots" = { "." = "write" }
[permissions.p.network]
enabled = true
mode = "full"
proxy_url = "http://127.0.0.1:3128"
allow_local_binding = false
[permissions.p.network.domains]
"api.openai.com" = "allow"
"**.example.com" = "allow"
"bad.example.com" = "deny"
[permissions.p.network.unix_sockets]
"/run/docker.sock" = "allow"
"/run/other.sock" = "none"
`, func(t *testing.T, pl *Plan) {
			n := pl.Network
			if n.On || !reflect.DeepEqual(n.Allowed, []string{"example.com", "*.example.com", "api.openai.com"}) || !reflect.DeepEqual(n.Denied, []string{"bad.example.com"}) {
				t.Errorf("%+v", n)
			}
			if !reflect.DeepEqual(n.UnixSockets, []string{"/run/docker.sock"}) || n.AllowLocalBinding == nil || *n.AllowLocalBinding {
				t.Errorf("%+v", n)
			}
		}},
		{"network on", `
default_permissions = "p"
[permissions.p.network]
enabled = true
`, func(t *testing.T, pl *Plan) {
			if !pl.Network.On || pl.Mode != "read-only" {
				t.Errorf("%+v", pl)
			}
		}},
		{"network star", `
default_permissions = "p"
[permissions.p.network]
enabled = true
domains = { "*" = "allow" }
`, func(t *testing.T, pl *Plan) {
			if !pl.Network.On || len(pl.Network.Allowed) > 0 {
				t.Errorf("%+v", pl.Network)
			}
		}},
		{"network disabled ignores domains", `
default_permissions = "p"
[permissions.p.network]
enabled = false
domains = { "x.com" = "allow" }
`, func(t *testing.T, pl *Plan) {
			if pl.Network.On || len(pl.Network.Allowed) > 0 {
				t.Errorf("%+v", pl.Network)
			}
		}},
		{"git writes", `
default_permissions = "p"
[permissions.p.filesystem]
allow_limited_git_writes = true
":project_roots" = "write"
`, func(t *testing.T, pl *Plan) {
			if pl.AllowGitWrites == nil || !*pl.AllowGitWrites {
				t.Errorf("%+v", pl)
			}
		}},
		{"unselected profiles have no effect", `
[permissions.p.filesystem]
":project_roots" = "write"
`, func(t *testing.T, pl *Plan) {
			if pl != nil {
				t.Errorf("%+v", pl)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := parse(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, pl)
		})
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unknown profile", `default_permissions = "nope"`, `no profile "nope"`},
		{"near profile", "default_permissions = \":workspaces\"", `did you mean ":workspace"?`},
		{"unknown profile key", "[permissions.p]\nfilesytem = {}", "unknown key permissions.p.filesytem (did you mean filesystem?)"},
		{"bad access", "[permissions.p.filesystem]\n\"/x\" = \"rw\"", `key permissions.p.filesystem."/x": unknown access "rw"`},
		{"access type", "[permissions.p.filesystem]\n\"/x\" = 1", `want "read", "write" or "none"`},
		{"nested type", "[permissions.p.filesystem]\n\":project_roots\" = { \".\" = true }", `key permissions.p.filesystem.":project_roots"."."`},
		{"relative top", "[permissions.p.filesystem]\n\"src\" = \"write\"", "is not an absolute path"},
		{"unknown special", "[permissions.p.filesystem]\n\":tmp_dir\" = \"write\"", "did you mean :tmpdir?"},
		{"root write", "[permissions.p.filesystem]\n\":root\" = \"write\"", "every directory writable"},
		{"root none", "[permissions.p.filesystem]\n\":root\" = \"none\"", "read allow-list"},
		{"minimal write", "[permissions.p.filesystem]\n\":minimal\" = \"write\"", `can only be "read"`},
		{"minimal table", "[permissions.p.filesystem]\n\":minimal\" = { \"x\" = \"read\" }", "not a table"},
		{"glob write", "[permissions.p.filesystem]\n\":project_roots\" = { \".\" = \"write\", \"**/build\" = \"write\" }", "a glob cannot be writable"},
		{"write without workspace", "[permissions.p.filesystem]\n\"/srv/out\" = \"write\"", "the workspace is not"},
		{"hide workspace", "[permissions.p.filesystem]\n\":project_roots\" = \"none\"", "hiding the workspace"},
		{"escape", "[permissions.p.filesystem]\n\":project_roots\" = { \"../x\" = \"none\" }", "leaves the path"},
		{"abs in table", "[permissions.p.filesystem]\n\":project_roots\" = { \"/x\" = \"none\" }", "relative to the table's path"},
		{"braces", "[permissions.p.filesystem]\n\":project_roots\" = { \"*.{pem,key}\" = \"none\" }", "brace alternatives"},
		{"bad glob", "[permissions.p.filesystem]\n\"/x/[a\" = \"none\"", "bad pattern"},
		{"partial doublestar", "[permissions.p.filesystem]\n\"/x/a**\" = \"none\"", "whole path element"},
		{"tilde user", "[permissions.p.filesystem]\n\"~bob/x\" = \"none\"", "not ~user"},
		{"dotdot abs", "[permissions.p.filesystem]\n\"/a/../etc\" = \"none\"", `has a ".."`},
		{"depth range", "[permissions.p.filesystem]\nglob_scan_max_depth = 0", "out of range"},
		{"depth type", "[permissions.p.filesystem]\nglob_scan_max_depth = \"3\"", "want an integer"},
		{"extends danger", "[permissions.p]\nextends = \":danger-full-access\"", "cannot be extended"},
		{"extends missing", "[permissions.p]\nextends = \"q\"", `no profile "q" to extend`},
		{"extends cycle", "[permissions.p]\nextends = \"q\"\n[permissions.q]\nextends = \"p\"", "a cycle"},
		{"builtin name", "[permissions.\":workspace\"]\ndescription = \"x\"", "cannot start with"},
		{"limited", "[permissions.p.network]\nenabled = true\nmode = \"limited\"", `"limited"`},
		{"net unknown", "[permissions.p.network]\nenable = true", "did you mean enabled?"},
		{"star and deny", "[permissions.p.network]\nenabled = true\ndomains = { \"*\" = \"allow\", \"x.com\" = \"deny\" }", "allow-everything-but"},
		{"deny only", "[permissions.p.network]\nenabled = true\ndomains = { \"x.com\" = \"deny\" }", "without allowed ones"},
		{"all sockets", "[permissions.p.network]\ndangerously_allow_all_unix_sockets = true", "one by one"},
		{"socket relative", "[permissions.p.network]\nunix_sockets = { \"x.sock\" = \"allow\" }", "absolute path"},
		{"spellings disagree", "[permissions.p.filesystem]\n\":project_roots\" = { \".\" = \"write\" }\n\":workspace_roots\" = { \".\" = \"read\" }", "keep one spelling"},
		{"glob re-open", "[permissions.p.filesystem]\n\"/s\" = \"none\"\n\"/s/*.pub\" = \"read\"", "a glob cannot re-open"},
		{"workspace root glob", "[permissions.p.workspace_roots]\n\"/x/*\" = true", "a workspace root is"},
		{"workspace root type", "[permissions.p.workspace_roots]\n\"/x\" = \"yes\"", "want a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckMixed(t *testing.T) {
	name := "p"
	if err := CheckMixed(&name, nil, []string{"sandbox_mode"}); !errors.Is(err, ErrMixed) ||
		!strings.Contains(err.Error(), "default_permissions") || !strings.Contains(err.Error(), "sandbox_mode") {
		t.Errorf("%v", err)
	}
	if err := CheckMixed(nil, map[string]any{}, []string{"[sandbox_workspace_write]"}); err == nil || !strings.Contains(err.Error(), "[permissions] (Codex's permission profiles) and [sandbox_workspace_write]") {
		t.Errorf("%v", err)
	}
	if err := CheckMixed(nil, nil, []string{"sandbox_mode"}); err != nil {
		t.Error(err)
	}
	if err := CheckMixed(&name, nil, nil); err != nil {
		t.Error(err)
	}
}

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"**/*.env", "a.env", true},
		{"**/*.env", "x/y/.env", true}, // "*" matches a leading dot, as in Codex
		{"**/*.env", "x/y/z.env", true},
		{"**/.env", "x/.env", true},
		{"*", ".hidden", true},
		{"a/**", "a", true},
		{"a/**", "a/b/c", true},
		{"a/*", "a/b/c", false},
	} {
		if got := MatchPath(tc.pat, tc.name); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %v", tc.pat, tc.name, got)
		}
	}
}
