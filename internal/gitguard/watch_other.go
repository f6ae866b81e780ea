//go:build !linux

package gitguard

// Watch: only Linux has a watcher; elsewhere every check walks the root.
func Watch(roots []string) (release func()) { return func() {} }

type watcher struct{}

func watcherFor(string) *watcher { return nil }

func (*watcher) dirtySince(int64) (map[string]bool, bool) { return nil, false }
func (*watcher) forget(int64)                             {}
