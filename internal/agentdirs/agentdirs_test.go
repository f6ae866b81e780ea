package agentdirs

import (
	"runtime"
	"testing"
)

func TestConfig(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix layout; Windows uses %APPDATA%")
	}
	env := map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}
	if got := Config(func(k string) string { return env[k] }); got != "/x/agentbox/config.toml" {
		t.Errorf("got %s", got)
	}
	delete(env, "XDG_CONFIG_HOME")
	if got := Config(func(k string) string { return env[k] }); got != "/h/.config/agentbox/config.toml" {
		t.Errorf("got %s", got)
	}
}

func TestRequireState(t *testing.T) {
	local := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"LOCALAPPDATA": v}[k] }
	}
	d, err := RequireState(local(`C:\Users\u\AppData\Local\`), "windows")
	if err != nil || d != `C:\Users\u\AppData\Local\agentbox` {
		t.Errorf("RequireState = %q, %v", d, err)
	}
	for _, v := range []string{"", `AppData\Local`} {
		if d, err := RequireState(local(v), "windows"); err == nil {
			t.Errorf("LOCALAPPDATA %q accepted: %q", v, d)
		}
	}
	if d, err := RequireState(func(string) string { return "" }, "linux"); err == nil {
		t.Errorf("no HOME accepted: %q", d)
	}
}
