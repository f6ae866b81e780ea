package setup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// tempDir is t.TempDir without os.RemoveAll, which fails under Wine 8.0:
// Go 1.26 deletes through FileDispositionInformationEx and Wine answers
// with an error Go does not treat as "unsupported". Plain os.Remove, file
// by file and deepest first, works on both.
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agentbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var paths []string
		filepath.WalkDir(d, func(p string, _ os.DirEntry, err error) error {
			paths = append(paths, p)
			return nil
		})
		slices.Reverse(paths)
		for _, p := range paths {
			os.Remove(p)
		}
	})
	return d
}
