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
