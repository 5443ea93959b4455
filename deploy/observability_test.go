// Package deploy holds only tests: they check the deployment assets in
// this directory (Prometheus rules, Grafana dashboard) against the real
// promtool, the metrics Vigil really exports, and docs/operations.md.
package deploy

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Paths of the assets, relative to this package's directory.
const (
	rulesFile     = "prometheus/alerts.yml"
	ruleTestsFile = "prometheus/alerts_test.yml"
	runbookFile   = "../docs/operations.md"
	runbookPrefix = "docs/operations.md#"
)

// promtool returns the path of promtool, failing t (not skipping) when it
// is missing: the rule tests are part of `make test`.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found in PATH (%v): install Debian's prometheus package, which carries it "+
			"(make test installs it: scripts/deps.sh)", err)
	}
	return path
}

// runPromtool runs promtool with args in dir and fails t with its output
// unless it exits 0.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheckRules: the alert rules parse and their expressions are
// valid PromQL.
func TestPromtoolCheckRules(t *testing.T) {
	out := runPromtool(t, ".", "check", "rules", rulesFile)
	t.Log(out)
}

// TestPromtoolTestRules: every case of alerts_test.yml passes: each alert
// fires on the series that should fire it and stays silent on the
// healthy ones.
func TestPromtoolTestRules(t *testing.T) {
	out := runPromtool(t, filepath.Dir(ruleTestsFile), "test", "rules", filepath.Base(ruleTestsFile))
	t.Log(out)
}

// alertRule is the part of a Prometheus alerting rule these tests read.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// loadAlerts parses rulesFile.
func loadAlerts(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var rules []alertRule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", rulesFile)
	}
	return rules
}

// TestAlertsHaveSummaryAndRunbook: every rule is an alert with a summary,
// a severity and a runbook_url whose anchor is a heading of
// docs/operations.md.
func TestAlertsHaveSummaryAndRunbook(t *testing.T) {
	anchors := markdownAnchors(t, runbookFile)
	seen := map[string]bool{}
	for _, r := range loadAlerts(t) {
		if r.Alert == "" {
			t.Errorf("a rule without an alert name (expr %q): this file holds alerts only", r.Expr)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s: defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if strings.TrimSpace(r.Annotations["summary"]) == "" {
			t.Errorf("%s: no summary annotation", r.Alert)
		}
		if r.Labels["severity"] != "page" && r.Labels["severity"] != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, r.Labels["severity"])
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookPrefix)
		if !ok || anchor == "" {
			t.Errorf("%s: runbook_url %q does not point into %s", r.Alert, url, runbookPrefix)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url %q: no heading with anchor #%s in %s", r.Alert, url, anchor, runbookFile)
		}
	}
}

// TestAlertsEachTestedBothWays: alerts_test.yml has, for every alert, an
// evaluation where it fires and one where it stays silent, and names no
// alert that does not exist.
func TestAlertsEachTestedBothWays(t *testing.T) {
	b, err := os.ReadFile(ruleTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", ruleTestsFile, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range doc.Tests {
		for _, c := range tc.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.AlertName] = true
			} else {
				silent[c.AlertName] = true
			}
		}
	}
	known := map[string]bool{}
	for _, r := range loadAlerts(t) {
		known[r.Alert] = true
		if !fires[r.Alert] {
			t.Errorf("%s: no case in %s where it fires", r.Alert, ruleTestsFile)
		}
		if !silent[r.Alert] {
			t.Errorf("%s: no case in %s where it stays silent", r.Alert, ruleTestsFile)
		}
	}
	for name := range fires {
		if !known[name] {
			t.Errorf("%s tests alert %s, which %s does not define", ruleTestsFile, name, rulesFile)
		}
	}
}

// headingRE matches an ATX heading line.
var headingRE = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)

// markdownAnchors returns the anchors GitHub generates for the headings
// of a Markdown file: lower case, punctuation other than '-' and '_'
// dropped, spaces as '-', repeats suffixed -1, -2, ...
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	counts := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := counts[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		counts[slug]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors
}

// slugify is GitHub's heading anchor of text.
func slugify(text string) string {
	text = strings.ReplaceAll(text, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestMarkdownAnchors pins the slug rules the runbook check relies on.
func TestMarkdownAnchors(t *testing.T) {
	for in, want := range map[string]string{
		"VigilNoLeader":                 "vigilnoleader",
		"Upgrades and migrations":       "upgrades-and-migrations",
		"Running Pro on `systemd`":      "running-pro-on-systemd",
		"Timing constraints (enforced)": "timing-constraints-enforced",
	} {
		if got := slugify(in); got != want {
			t.Errorf("slugify(%q) = %q, want %q", in, got, want)
		}
	}
}
