package store_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The store takes and returns its own types; the wire protocol is the
// API's to convert to (adr/0013-state-package.md). No non-test file of the
// package may import package api or anything under it.
func TestStoreDoesNotImportTheAPI(t *testing.T) {
	t.Parallel()
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
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "github.com/vigil-sched/vigil/api" || strings.HasPrefix(path, "github.com/vigil-sched/vigil/api/") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
