package wire

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Package wire stays init-light: pid 1 of a session's commands and the
// resident helper's lean client decode with it from a package init, before
// the heavy packages of the binary are initialised.
func TestImportsStayLight(t *testing.T) {
	light := map[string]bool{"errors": true, "strconv": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); !light[p] {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}
