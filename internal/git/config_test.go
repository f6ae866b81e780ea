package git

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitConfigCases are config texts and what git makes of them, written as
// "name=value" lines ("name" alone for a key with no value), or "error".
var gitConfigCases = []struct {
	name, in, want string
}{
	{"plain", "[core]\n\thooksPath = .husky\n", "core.hookspath=.husky"},
	{"case-insensitive section and key", "[CoRe]\n\tHooksPATH = x\n", "core.hookspath=x"},
	{"subsection case kept", "[Submodule \"Lib\"]\n\tPath = lib\n", "submodule.Lib.path=lib"},
	{"legacy subsection lowercased", "[Submodule.Lib]\n\tPath = lib\n", "submodule.lib.path=lib"},
	{"one-line section", "[core] pager = evil\n", "core.pager=evil"},
	{"one-line, two headers", "[a]x=1\n[b] y = 2", "a.x=1\nb.y=2"},
	{"no value is true", "[core]\n\tbare\n", "core.bare"},
	{"empty value", "[core]\n\tpager =\n", "core.pager="},
	{"semicolon comment", "; [core]\n[x]\n\ty = 1 ; z\n", "x.y=1"},
	{"hash comment in value", "[x]\n\ty = a#b\n", "x.y=a"},
	{"quoted comment chars", "[x]\n\ty = \"a#b;c\"\n", "x.y=a#b;c"},
	{"continuation", "[x]\n\ty = a\\\nb\n", "x.y=ab"},
	{"continuation in quotes", "[x]\n\ty = \"a \\\n b\"\n", "x.y=a  b"},
	{"escapes", "[x]\n\ty = a\\tb\\\\c\\\"d\n", "x.y=a\tb\\c\"d"},
	{"inner blanks collapse per char", "[x]\n\ty = a \t b  \n", "x.y=a   b"},
	{"quoted blanks kept", "[x]\n\ty = \" a \"\n", "x.y= a "},
	{"CRLF", "[x]\r\n\ty = 1\r\n", "x.y=1"},
	{"BOM", "\xef\xbb\xbf[x]\ny=1\n", "x.y=1"},
	{"subsection escapes", "[a \"b\\\"c\\\\d\\e\"]\nk=v\n", "a.b\"c\\de.k=v"},
	{"dotted subsection", "[includeIf \"gitdir:~/w/\"]\npath = x\n", "includeif.gitdir:~/w/.path=x"},
	{"legacy dots", "[a.B.c]\nk=v\n", "a.b.c.k=v"},
	{"key with dash and digit", "[x]\na-1 = v\n", "x.a-1=v"},
	{"no newline at end", "[x]\ny=1", "x.y=1"},
	{"backslash at EOF", "[x]\ny=1\\", "x.y=1"},
	{"subsection then key on the line", "[a \"B\"]x=1\n", "a.B.x=1"},
	{"comment after header", "[x] ; c\n\ty = 1\n", "x.y=1"},
	{"bare key at EOF", "[x]\ny", "x.y"},
	{"trailing blanks before comment", "[x]\ny = a   # c\n", "x.y=a"},
	{"quote then text", "[x]\ny = \"a\" b\n", "x.y=a b"},
	{"lone CR is a blank", "[x]\ny = a\rb\n", "x.y=a b"},
	{"space before equals", "[x]\ny\t = 1\n", "x.y=1"},
	{"value with equals", "[x]\ny = a=b\n", "x.y=a=b"},
	{"subsection backslash-newline", "[a \"b\\\n\"]\nk=v\n", "error"},
	{"key before section", "y = 1\n", "y=1"},
	{"unknown escape", "[x]\ny = \\q\n", "error"},
	{"unterminated quote", "[x]\ny = \"a\nz=1\n", "error"},
	{"unterminated header", "[x\ny=1\n", "error"},
	{"empty header", "[]\ny=1\n", "error"},
	{"bad key start", "[x]\n1y=1\n", "error"},
	{"junk after key", "[x]\ny z\n", "error"},
	{"comment after bare key", "[x]\ny # c\n", "error"},
	{"junk after subsection", "[x \"y\" ]\nk=v\n", "error"},
	{"header across lines", "[x \"y\n\"]\nk=v\n", "error"},
	{"underscore in key", "[x]\na_b = 1\n", "error"},
	{"bad header char", "[x_y]\nk=v\n", "error"},
}

func render(es []ConfigEntry) string {
	var b []string
	for _, e := range es {
		if e.NoValue {
			b = append(b, e.Name)
		} else {
			b = append(b, e.Name+"="+e.Value)
		}
	}
	return strings.Join(b, "\n")
}

func TestParseGitConfig(t *testing.T) {
	for _, c := range gitConfigCases {
		es, err := ParseConfig([]byte(c.in))
		got := render(es)
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("%s: %q parsed as %q (err %v), want %q", c.name, c.in, got, err, c.want)
		}
	}
}

// gitList is git's own reading of a config text, in the same rendering, or
// "error".
func gitList(t testing.TB, git, dir, in string) string {
	f := filepath.Join(dir, "config")
	if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(git, "config", "--file", f, "--list", "--null")
	cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return "error"
	}
	var b []string
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		name, val, ok := bytes.Cut(rec, []byte{'\n'})
		if ok {
			b = append(b, string(name)+"="+string(val))
		} else {
			b = append(b, string(name))
		}
	}
	return strings.Join(b, "\n")
}

// TestParseGitConfigMatchesGit checks the table against the git installed
// here, so the expectations are git's and not this parser's opinion.
func TestParseGitConfigMatchesGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed: the table alone is checked")
	}
	dir := t.TempDir()
	for _, c := range gitConfigCases {
		if got := gitList(t, git, dir, c.in); got != c.want {
			t.Errorf("%s: git reads %q as %q, the table says %q", c.name, c.in, got, c.want)
		}
	}
}

func FuzzParseGitConfig(f *testing.F) {
	for _, c := range gitConfigCases {
		f.Add(c.in)
	}
	git, _ := exec.LookPath("git")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in string) {
		es, err := ParseConfig([]byte(in))
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error of type %T", err)
			}
		}
		for _, e := range es {
			if e.Name == "" || e.Subsection() != "" && e.Section()+"."+e.Subsection()+"."+e.Key() != e.Name {
				t.Fatalf("malformed name %q", e.Name)
			}
		}
		// With AGENTBOX_FUZZ_GIT=1, every input is also checked
		// against git itself (slow: one git process per input).
		if git != "" && os.Getenv("AGENTBOX_FUZZ_GIT") != "" && !strings.ContainsRune(in, 0) {
			got := render(es)
			if err != nil {
				got = "error"
			}
			if want := gitList(t, git, dir, in); got != want {
				t.Fatalf("%q: agentbox reads %q, git reads %q", in, got, want)
			}
		}
	})
}
