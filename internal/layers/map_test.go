package layers_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// row is one line of the package map in docs/design.md §2.
type row struct {
	names []string // the packages the line is about
	rule  string   // its "may import" cell, as written
}

var backticked = regexp.MustCompile("`([^`]+)`")

// packageMap reads the table of docs/design.md §2.
func packageMap(t *testing.T) []row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "| package | job | may import (of Vigil's) |")
	require.GreaterOrEqual(t, start, 0, "docs/design.md §2 has the package map with its import column")
	var rows []row
	for _, line := range strings.Split(doc[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 3, "a package map line has three cells: %s", line)
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			names = append(names, m[1])
		}
		rows = append(rows, row{names: names, rule: strings.TrimSpace(cells[2])})
	}
	return rows
}

// allowed turns row i's rule into the packages it allows; ok is false for
// "anything".
func allowed(rows []row, i int) (pkgs []string, ok bool) {
	rule := rows[i].rule
	named := func() []string {
		var out []string
		for _, m := range backticked.FindAllStringSubmatch(rule, -1) {
			out = append(out, strings.TrimSuffix(m[1], "/..."))
		}
		return out
	}
	switch {
	case rule == "nothing":
		return nil, true
	case rule == "anything":
		return nil, false
	case strings.HasPrefix(rule, "every package above but"):
		for _, r := range rows[:i] {
			pkgs = append(pkgs, r.names...)
		}
	case strings.HasPrefix(rule, "anything but"):
		for _, r := range rows {
			if r.rule != "anything" {
				pkgs = append(pkgs, r.names...)
			}
		}
	default:
		return named(), true
	}
	except := named()
	return slices.DeleteFunc(pkgs, func(p string) bool {
		return slices.ContainsFunc(except, func(e string) bool { return p == e || strings.HasPrefix(p, e+"/") })
	}), true
}

// covers reports whether a row's name stands for pkg: the package itself,
// a harness's subpackage, or a test-support package (*/…test).
func covers(name, rule, pkg string) bool {
	switch {
	case name == pkg:
		return true
	case name == "*/…test":
		return strings.HasSuffix(pkg, "test") && strings.Contains(pkg, "/")
	case rule == "anything":
		return strings.HasPrefix(pkg, name+"/")
	}
	return false
}

// modulePackages lists every directory of the module with non-test Go
// files, module-relative.
func modulePackages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err == nil && rel != "." && !slices.Contains(out, rel) {
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	require.NoError(t, err)
	return out
}

// TestPackageMapIsTheImportRule: every package of the module has a line
// in the package map of docs/design.md §2, and imports only what its
// "may import" cell allows. A new package, or a new import across layers,
// fails here until the map says so.
func TestPackageMapIsTheImportRule(t *testing.T) {
	rows := packageMap(t)
	for _, pkg := range modulePackages(t) {
		i := slices.IndexFunc(rows, func(r row) bool {
			return slices.ContainsFunc(r.names, func(n string) bool { return covers(n, r.rule, pkg) })
		})
		if !assert.GreaterOrEqual(t, i, 0, "package %s has no line in the package map of docs/design.md §2", pkg) {
			continue
		}
		ok, bounded := allowed(rows, i)
		if !bounded {
			continue
		}
		for _, imp := range imports(t, pkg) {
			assert.Contains(t, ok, imp, "%s imports %s, which its line in docs/design.md §2 (%q) does not allow", pkg, imp, rows[i].rule)
		}
	}
}
