package agent

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// secretMask is the text that replaces a secret value in a task's log.
const secretMask = "***"

// newMasker returns what replaces every non-empty value of secrets (a
// claim's ClaimedTask.Secrets) with secretMask in one log line, or nil
// when there is none to mask. Longer values are tried first, so a value
// that contains another is masked whole. It works line by line, after
// the splitter: a value the task prints split across lines, or cut by
// the 64 KiB line limit, is not masked (docs/security.md "Secrets").
func newMasker(secrets map[string]string) *strings.Replacer {
	values := slices.Collect(maps.Values(secrets))
	values = slices.DeleteFunc(values, func(v string) bool { return v == "" })
	if len(values) == 0 {
		return nil
	}
	slices.SortFunc(values, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	values = slices.Compact(values)
	pairs := make([]string, 0, 2*len(values))
	for _, v := range values {
		pairs = append(pairs, v, secretMask)
	}
	return strings.NewReplacer(pairs...)
}
