package winenv

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestNoNetwork(t *testing.T) {
	env := []string{"Path=C:\\Windows;C:\\Program Files\\OpenSSH", "https_proxy=http://real:3128", "PATHEXT=.COM;.EXE;.BAT;.CMD;.PY", "HOME=x"}
	out := NoNetwork(env, `C:\Users\u\AppData\Local\agentbox\denybin`)
	for k, want := range map[string]string{
		"HTTPS_PROXY": DeadProxy, "HTTP_PROXY": DeadProxy, "ALL_PROXY": DeadProxy,
		"GIT_HTTP_PROXY": DeadProxy, "GIT_HTTPS_PROXY": DeadProxy,
		"NO_PROXY": "localhost,127.0.0.1,::1", "PATHEXT": ".CMD;.BAT;.COM;.EXE;.PY",
		"PATH": `C:\Users\u\AppData\Local\agentbox\denybin;C:\Windows;C:\Program Files\OpenSSH`,
		"HOME": "x", "PIP_NO_INDEX": "1", "NPM_CONFIG_OFFLINE": "true", "CARGO_NET_OFFLINE": "true",
	} {
		if v, _ := Get(out, k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if v, _ := Get(out, "GIT_SSH_COMMAND"); !strings.Contains(v, "exit 1") {
		t.Errorf("GIT_SSH_COMMAND = %q", v)
	}
	n := 0
	for _, kv := range out {
		if strings.HasPrefix(strings.ToUpper(kv), "HTTPS_PROXY=") || strings.HasPrefix(strings.ToUpper(kv), "PATH=") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("duplicate spellings left: %v", out)
	}
	// Idempotent: running twice does not stack denybin.
	again := NoNetwork(out, `C:\Users\u\AppData\Local\agentbox\denybin\`)
	if p, _ := Get(again, "PATH"); strings.Count(strings.ToLower(p), "denybin") != 1 {
		t.Errorf("PATH after second rewrite: %s", p)
	}
}

func TestStubs(t *testing.T) {
	files := StubFiles()
	for _, n := range []string{"ssh.cmd", "ssh.bat", "scp.cmd", "scp.bat"} {
		c, ok := files[n]
		if !ok {
			t.Fatalf("no %s", n)
		}
		if strings.Count(c, "\n") != strings.Count(c, "\r\n") || !strings.HasSuffix(c, "\r\n") {
			t.Errorf("%s has bare LF: %q", n, c)
		}
		if strings.Contains(c, `\r`) || !strings.Contains(c, "exit /b 1") || !strings.HasPrefix(c, "@echo off") {
			t.Errorf("%s content %q", n, c)
		}
	}
}

func TestBlock(t *testing.T) {
	b, err := Block([]string{"b=2", "=C:=C:\\x", "Path=a", "A=1", "PATH=b", "a=3"}, `C:\Windows`)
	if err != nil {
		t.Fatal(err)
	}
	if b[len(b)-1] != 0 || b[len(b)-2] != 0 {
		t.Fatal("block not double-NUL terminated")
	}
	got := strings.Split(string(utf16.Decode(b[:len(b)-2])), "\x00")
	want := []string{"=C:=C:\\x", "a=3", "b=2", "PATH=b", "SYSTEMROOT=C:\\Windows"}
	if !slices.Equal(got, want) {
		t.Errorf("block = %q, want %q", got, want)
	}
	if _, err := Block([]string{"A=x\x00y"}, ""); err == nil {
		t.Error("NUL accepted")
	}
	if b, _ := Block(nil, ""); len(b) != 2 {
		t.Errorf("empty block = %v", b)
	}
	// An existing SystemRoot (any case) is kept as is.
	b, _ = Block([]string{"SystemRoot=D:\\Win"}, `C:\Windows`)
	if s := string(utf16.Decode(b)); !strings.Contains(s, "SystemRoot=D:\\Win") || strings.Contains(s, "C:\\Windows") {
		t.Errorf("SystemRoot overwritten: %q", s)
	}
}

func TestQuoteArg(t *testing.T) {
	for in, want := range map[string]string{
		`C:\Program Files\x.exe`: `"C:\Program Files\x.exe"`, ``: `""`, `a b`: `"a b"`, `a"b`: `"a\"b"`,
		`C:\dir\`: `C:\dir\`, `C:\dir with space\`: `"C:\dir with space\\"`, `%PATH%`: `%PATH%`, `a&b`: `a&b`,
		`a\\"b`: `"a\\\\\"b"`,
	} {
		if got := QuoteArg(in); got != want {
			t.Errorf("QuoteArg(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestQuoteBatchArg(t *testing.T) {
	for in, want := range map[string]string{
		`plain`: `plain`, ``: `""`, `a b`: `"a b"`, `a&b`: `"a&b"`, `%PATH%`: `"%%cd:~,%PATH%%cd:~,%"`,
		`say "hi"`: `"say ""hi"""`, `x^y|z`: `"x^y|z"`, `C:\d\`: `C:\d\`, `C:\d x\`: `"C:\d x\\"`,
	} {
		got, err := QuoteBatchArg(in)
		if err != nil || got != want {
			t.Errorf("QuoteBatchArg(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"a\nb", "a\rb", "a\x00"} {
		if _, err := QuoteBatchArg(bad); err == nil {
			t.Errorf("QuoteBatchArg(%q) accepted", bad)
		}
	}
}

func TestBuild(t *testing.T) {
	cl, err := Build(`C:\w\run.bat`, []string{"run", "a b", "&calc"}, `C:\Windows\System32\cmd.exe`)
	if err != nil {
		t.Fatal(err)
	}
	if cl.App != `C:\Windows\System32\cmd.exe` || cl.Line != `C:\Windows\System32\cmd.exe /d /e:on /v:off /s /c ""C:\w\run.bat" "a b" "&calc""` {
		t.Errorf("batch: %+v", cl)
	}
	cl, _ = Build(`C:\Windows\System32\cmd.exe`, []string{"cmd", "/d", "/c", "echo", "hi", "&", "exit", "3"}, "")
	if cl.Line != `cmd /d /c echo hi & exit 3` {
		t.Errorf("cmd: %q", cl.Line)
	}
	cl, _ = Build(`C:\Program Files\Go\bin\go.exe`, []string{`C:\Program Files\Go\bin\go.exe`, "test", "./..."}, "")
	if cl.Line != `"C:\Program Files\Go\bin\go.exe" test ./...` {
		t.Errorf("exe: %q", cl.Line)
	}
}

func TestLookPath(t *testing.T) {
	files := map[string]bool{
		`C:\deny\ssh.cmd`: true, `C:\ssh\ssh.exe`: true, `C:\bin\tool.exe`: true, `C:\bin\tool.bat`: true, `C:\w\x.py`: true,
	}
	exists := func(p string) bool { return files[p] }
	pathext := ReorderPathext(".COM;.EXE;.BAT;.CMD")
	for _, c := range []struct{ name, path, want string }{
		{"ssh", `C:\deny;C:\ssh`, `C:\deny\ssh.cmd`},
		{"ssh.exe", `C:\deny;C:\ssh`, `C:\ssh\ssh.exe`},
		{"tool", `C:\bin`, `C:\bin\tool.bat`},
		{`C:\w\x.py`, ``, `C:\w\x.py`},
		{"nope", `C:\bin`, ``},
	} {
		got, _ := LookPath(c.name, c.path, pathext, exists)
		if got != c.want {
			t.Errorf("LookPath(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
