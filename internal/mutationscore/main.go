// Command mutationscore reads the JSON reports gremlins writes (one per
// target of scripts/mutation.sh) and prints, per target and in all, the
// mutants killed, lived, timed out, not viable and not covered, the
// efficacy (killed / (killed + lived), percent) and the mutant coverage
// (covered / all, percent), then every mutant that lived with its place.
// It counts the per-file mutations itself: gremlins' own totals also
// count the files its --exclude-files left out. Reports given the same
// NAME are one target (run once per file). A NOT COVERED + that joins
// strings is counted NOT VIABLE (see stringConcats); -root names the
// module's directory, under which target NAME's files are NAME/FILE.
//
// Usage: mutationscore -efficacy 90 -coverage 90 NAME=FILE.json ...
// Exit status 1 when a target is below either threshold, 2 on bad input.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// report is the part of gremlins' --output JSON this reads.
type report struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// tally counts one target's mutants by gremlins status.
type tally map[string]int

func (t tally) efficacy() float64 {
	k, l := t["KILLED"], t["LIVED"]
	if k+l == 0 {
		return 100
	}
	return 100 * float64(k) / float64(k+l)
}

func (t tally) coverage() float64 {
	all := 0
	for _, n := range t {
		all += n
	}
	if all == 0 {
		return 100
	}
	return 100 * float64(all-t["NOT COVERED"]) / float64(all)
}

func (t tally) String() string {
	return fmt.Sprintf("killed %d, lived %d, timed out %d, not viable %d, not covered %d: efficacy %.1f %%, coverage %.1f %%",
		t["KILLED"], t["LIVED"], t["TIMED OUT"], t["NOT VIABLE"], t["NOT COVERED"], t.efficacy(), t.coverage())
}

func main() {
	eff := flag.Float64("efficacy", 90, "the least efficacy a target may have, percent")
	cov := flag.Float64("coverage", 90, "the least mutant coverage a target may have, percent")
	root := flag.String("root", ".", "the module's directory; a target NAME's files are under ROOT/NAME")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mutationscore [-efficacy P] [-coverage P] NAME=FILE.json ...")
		os.Exit(2)
	}
	total := tally{}
	targets := map[string]tally{}
	concatsOf := map[string]int{} // NOT COVERED string + counted NOT VIABLE
	var names, lived []string
	for _, arg := range flag.Args() {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "mutationscore: argument %q: want NAME=FILE.json\n", arg)
			os.Exit(2)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mutationscore: target %s: %v\n", name, err)
			os.Exit(2)
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Fprintf(os.Stderr, "mutationscore: target %s: %s is not a gremlins report: %v\n", name, path, err)
			os.Exit(2)
		}
		t, seen := targets[name]
		if !seen {
			t = tally{}
			targets[name] = t
			names = append(names, name)
		}
		for _, f := range r.Files {
			var concats map[string]bool
			for _, m := range f.Mutations {
				if m.Status == "NOT COVERED" && m.Type == "ARITHMETIC_BASE" {
					if concats == nil {
						src := filepath.Join(*root, name, f.FileName)
						if concats, err = stringConcats(src); err != nil {
							fmt.Fprintf(os.Stderr, "mutationscore: target %s: %v\n", name, err)
							os.Exit(2)
						}
					}
					if concats[posKey(m.Line, m.Column)] {
						m.Status = "NOT VIABLE"
						concatsOf[name]++
					}
				}
				t[m.Status]++
				total[m.Status]++
				if m.Status == "LIVED" {
					lived = append(lived, fmt.Sprintf("%s/%s:%d:%d %s", name, f.FileName, m.Line, m.Column, m.Type))
				}
			}
		}
	}
	below := false
	for _, name := range names {
		t := targets[name]
		fmt.Printf("%-7s %s\n", name, t)
		if n := concatsOf[name]; n > 0 {
			fmt.Printf("        (%d of the not viable: a + joining strings, which gremlins reported NOT COVERED)\n", n)
		}
		if t.efficacy() < *eff || t.coverage() < *cov {
			below = true
		}
	}
	fmt.Printf("%-7s %s\n", "all", total)
	sort.Strings(lived)
	for _, l := range lived {
		fmt.Println("  lived:", l)
	}
	if below {
		fmt.Printf("below the thresholds (efficacy %.0f %%, coverage %.0f %%)\n", *eff, *cov)
		os.Exit(1)
	}
}
