package winenv

import (
	"slices"
	"testing"
)

func TestGitSafeDirectories(t *testing.T) {
	got, err := GitSafeDirectories([]string{"PATH=C:\\bin"}, `C:\Users\u\proj\`, `C:\Users\u\proj`, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=C:\\bin",
		"GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=C:/Users/u/proj",
		"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1=C:/Users/u/proj/*",
		"GIT_CONFIG_COUNT=2"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// The caller's own entries stay and ours are numbered after them.
func TestGitSafeDirectoriesKeepsExisting(t *testing.T) {
	env := []string{"git_config_count=1", "GIT_CONFIG_KEY_0=core.pager", "GIT_CONFIG_VALUE_0=more"}
	got, err := GitSafeDirectories(env, `D:\w`)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "core.pager", "GIT_CONFIG_VALUE_0": "more",
		"GIT_CONFIG_KEY_1": "safe.directory", "GIT_CONFIG_VALUE_1": "D:/w",
		"GIT_CONFIG_KEY_2": "safe.directory", "GIT_CONFIG_VALUE_2": "D:/w/*",
	} {
		if g, _ := Get(got, k); g != v {
			t.Errorf("%s = %q, want %q (env %q)", k, g, v, got)
		}
	}
	n := 0
	for _, kv := range got {
		if k, _, _ := cutEnv(kv); k == "GIT_CONFIG_COUNT" || k == "git_config_count" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d GIT_CONFIG_COUNT entries in %q", n, got)
	}
	for _, bad := range []string{"GIT_CONFIG_COUNT=x", "GIT_CONFIG_COUNT=-1"} {
		if _, err := GitSafeDirectories([]string{bad}, `C:\w`); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if got, err := GitSafeDirectories([]string{"A=1"}); err != nil || !slices.Equal(got, []string{"A=1"}) {
		t.Errorf("no dirs: %q, %v", got, err)
	}
}
