package layers_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/vigil-sched/vigil/"

// root is the module's directory, from this package's.
const root = "../.."

// imports returns the module packages the non-test files of pkg (a path
// below the module, "store") import, without the module prefix.
func imports(t *testing.T, pkg string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no Go files in %s", pkg)
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(path, module); ok && !slices.Contains(out, rest) {
				out = append(out, rest)
			}
		}
	}
	return out
}

// below returns every module package api's non-test files reach, apart
// from api's own subpackages (api/protocol, the wire): the domain layers.
func below(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(pkg string)
	walk = func(pkg string) {
		for _, imp := range imports(t, pkg) {
			if imp == "api" || strings.HasPrefix(imp, "api/") || seen[imp] {
				continue
			}
			seen[imp] = true
			walk(imp)
		}
	}
	walk("api")
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// violations returns "pkg imports imp" for each import of pkgs that bad
// refuses.
func violations(t *testing.T, pkgs []string, bad func(pkg, imp string) bool) []string {
	var out []string
	for _, pkg := range pkgs {
		for _, imp := range imports(t, pkg) {
			if bad(pkg, imp) {
				out = append(out, pkg+" imports "+imp)
			}
		}
	}
	return out
}

func isAPI(imp string) bool { return imp == "api" || strings.HasPrefix(imp, "api/") }

// Wire types stay at the edge (adr/0013-state-package.md): no package
// below api imports api or api/protocol; each returns its own types and
// api converts them (api/convert.go, api/convert_recovery.go).
func TestNothingBelowTheAPIImportsIt(t *testing.T) {
	pkgs := below(t)
	for _, want := range []string{"store", "reaper", "cluster", "leader", "state", "retry", "metrics"} {
		require.Contains(t, pkgs, want, "api's imports no longer reach %s: the walk is broken", want)
	}
	// api reaches the scheduler only through its Control interface; the
	// scheduler is below it all the same.
	require.NotContains(t, pkgs, "scheduler", "api imports the scheduler again")
	pkgs = append(pkgs, "scheduler")
	assert.Empty(t, violations(t, pkgs, func(_, imp string) bool { return isAPI(imp) }))
}

// Policy stays out of the store: it imports nothing of the scheduler
// (retry policy is the leaf package retry), and state and retry are
// leaves that import nothing of Vigil's.
func TestStoreAndLeavesKeepTheirImports(t *testing.T) {
	assert.Empty(t, violations(t, []string{"store"}, func(_, imp string) bool {
		return imp == "scheduler" || strings.HasPrefix(imp, "scheduler/")
	}))
	assert.Empty(t, violations(t, []string{"state", "retry"}, func(string, string) bool { return true }))
}
