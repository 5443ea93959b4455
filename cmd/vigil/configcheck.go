package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkConfigKeys fails on a key of the --config file at path that no
// command of the tree under root reads, naming the key and, where one is
// close, the key that was probably meant. A file may be shared by several
// commands (lite, server, agent), so a key any of them reads is accepted.
func checkConfigKeys(root *cobra.Command, path string, keys []string) error {
	known := configKeys(root)
	var unknown []string
	for _, k := range keys {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	lines := make([]string, len(unknown))
	for i, k := range unknown {
		lines[i] = fmt.Sprintf("config %s: unknown key %q", path, k)
		if near := nearest(k, known); near != "" {
			lines[i] += fmt.Sprintf("; did you mean %q?", near)
		}
	}
	return usageError("%s", strings.Join(lines, "\n"))
}

// configKeys are the keys a config file may hold: every flag name of the
// tree (but --config and --help), and section.name for the flags that
// also sit in a section.
func configKeys(root *cobra.Command) map[string]bool {
	known := map[string]bool{}
	var walk func(*cobra.Command)
	add := func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" {
			return
		}
		known[f.Name] = true
		for _, section := range f.Annotations[configSection] {
			known[section+"."+f.Name] = true
		}
	}
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return known
}

// nearest is the known key closest to k by edit distance (also comparing
// the part after a section), or "" when none is close enough to suggest.
func nearest(k string, known map[string]bool) string {
	best, bestD := "", 0
	for cand := range known {
		d := editDistance(k, cand)
		if _, leaf, ok := strings.Cut(k, "."); ok && !strings.Contains(cand, ".") {
			d = min(d, editDistance(leaf, cand)+1) // a key in the wrong section
		}
		if best == "" || d < bestD || (d == bestD && cand < best) {
			best, bestD = cand, d
		}
	}
	if best == "" || bestD > max(2, len(k)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describeValueError says what is wrong with value for flag f in words, in
// place of the parser's text ("strconv.ParseInt: parsing ...").
func describeValueError(f *pflag.Flag, value string, err error) string {
	var rule string
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		rule = "must be a whole number"
		if errors.Is(err, strconv.ErrRange) {
			rule = "is out of range"
		}
	case "float32", "float64":
		rule = "must be a number such as 0.5"
	case "duration":
		rule = "must be a duration such as 90s, 5m or 1h30m"
		if _, perr := time.ParseDuration(value); perr != nil && !strings.ContainsAny(value, "nsuµmh") {
			rule += " (a unit is required)"
		}
	case "bool":
		rule = "must be true or false"
	default:
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			return fmt.Sprintf("%q: %v", value, ne.Err)
		}
		return err.Error()
	}
	return fmt.Sprintf("%q %s", value, rule)
}

// flagErrorPrefix matches a line of an error that names a flag first,
// "--name: ...".
var flagErrorPrefix = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*): `)

// nameValueSources rewrites the lines of err that start "--name: " for a
// flag whose value came from the environment or the config file, to
// "--name (from SOURCE): ", so that a value rejected by a command's own
// checks names its source like one its parser rejected. Other errors are
// returned as they are; the exit code is kept.
func nameValueSources(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	lines := strings.Split(msg, "\n")
	changed := false
	for i, line := range lines {
		m := flagErrorPrefix.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := cmd.Flags().Lookup(m[1])
		if f == nil || f.Changed || len(f.Annotations[sourceAnnotation]) == 0 {
			continue
		}
		lines[i] = fmt.Sprintf("--%s (from %s): %s", m[1], f.Annotations[sourceAnnotation][0], line[len(m[0]):])
		changed = true
	}
	if !changed {
		return err
	}
	code := exitError
	var ec *exitCodeError
	if errors.As(err, &ec) {
		code = ec.code
	}
	return &exitCodeError{code: code, err: errors.New(strings.Join(lines, "\n"))}
}

// flagParseError is the root's flag error func: a value the parser
// rejects is a usage error (exit 2) naming the flag and the rule in words.
func flagParseError(_ *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		f := iv.GetFlag()
		return usageError("--%s: %s", f.Name, describeValueError(f, iv.GetValue(), iv.Unwrap()))
	}
	return &exitCodeError{code: exitUsage, err: err}
}
