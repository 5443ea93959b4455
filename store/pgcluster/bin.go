package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned (wrapped) by Start when no directory holding the
// PostgreSQL server binaries initdb, pg_ctl and postgres is found, neither on
// PATH nor under /usr/lib/postgresql/*/bin (docs/design.md §1, §11).
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH " +
	"or under /usr/lib/postgresql/*/bin: install PostgreSQL server binaries " +
	"(e.g. `apt-get install postgresql`) or pass --database-url")

// binGlobs are searched after PATH, newest major version first. The Debian
// layout comes from docs/design.md §11; the RHEL/PGDG layout costs nothing to add.
var binGlobs = []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"}

// binaries is one directory holding a complete set of server binaries.
type binaries struct {
	dir      string // real (symlink-resolved) directory
	initdb   string
	pgCtl    string
	postgres string
	major    string // "15", "9.6"; filled by version()
}

// findBinaries returns the binaries to use. With binDir set only that
// directory is considered. Otherwise PATH comes first, then binGlobs newest
// first. When wantMajor is not empty (an existing cluster's PG_VERSION) the
// first candidate of that major version wins, since PostgreSQL cannot open a
// data directory of another major version.
func findBinaries(ctx context.Context, binDir, wantMajor string) (binaries, error) {
	var cands []string
	if binDir != "" {
		cands = []string{binDir}
	} else {
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				cands = append(cands, filepath.Dir(real))
			}
		}
		for _, g := range binGlobs {
			cands = append(cands, globNewestFirst(g)...)
		}
	}

	var found []binaries
	seen := map[string]bool{}
	for _, d := range cands {
		real, err := filepath.EvalSymlinks(d)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		b := binaries{
			dir:      real,
			initdb:   filepath.Join(real, "initdb"),
			pgCtl:    filepath.Join(real, "pg_ctl"),
			postgres: filepath.Join(real, "postgres"),
		}
		if !isExecutable(b.initdb) || !isExecutable(b.pgCtl) || !isExecutable(b.postgres) {
			continue
		}
		major, err := version(ctx, b.pgCtl)
		if err != nil {
			continue
		}
		b.major = major
		if wantMajor == "" || major == wantMajor {
			return b, nil
		}
		found = append(found, b)
	}
	if binDir != "" && len(found) == 0 {
		return binaries{}, fmt.Errorf("pgcluster: %s does not hold the PostgreSQL server binaries initdb, pg_ctl and postgres: %w",
			binDir, ErrNoBinaries)
	}
	if len(found) == 0 {
		return binaries{}, fmt.Errorf("pgcluster: %w", ErrNoBinaries)
	}
	var have []string
	for _, b := range found {
		have = append(have, b.major+" ("+b.dir+")")
	}
	return binaries{}, fmt.Errorf("pgcluster: the data directory was initialised by PostgreSQL %s, "+
		"but the installed server binaries are PostgreSQL %s: install the PostgreSQL %s server binaries "+
		"or use another data directory", wantMajor, strings.Join(have, ", "), wantMajor)
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// version returns the major version of pg_ctl ("15"; "9.6" before 10) as
// written in PG_VERSION files. pg_ctl --version is answered before pg_ctl's
// refusal to run as root, so it needs no runuser.
func version(ctx context.Context, pgCtl string) (string, error) {
	out, err := exec.CommandContext(ctx, pgCtl, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", pgCtl, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("%s --version: unrecognised output %q", pgCtl, out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 10 && m[2] != "" {
		return m[1] + "." + m[2], nil
	}
	return m[1], nil
}

// globNewestFirst expands a pattern whose * is a version ("15", "9.6") and
// sorts the matches by that version, newest first.
func globNewestFirst(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	prefix, _, _ := strings.Cut(pattern, "*")
	key := func(p string) []int {
		v, _, _ := strings.Cut(strings.TrimPrefix(p, prefix), "/")
		var nums []int
		for _, part := range strings.Split(v, ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				n = -1
			}
			nums = append(nums, n)
		}
		return nums
	}
	slices.SortStableFunc(matches, func(a, b string) int { return slices.Compare(key(b), key(a)) })
	return matches
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
