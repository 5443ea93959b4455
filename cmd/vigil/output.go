package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-sched/vigil/state"
)

// Shared formatting of the client subcommands: tables, times, durations.

// newTable returns a tabwriter for a table; the caller Flushes it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// tableRow writes one tab-separated table row.
func tableRow(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fmtTime is t in local time, RFC 3339, to the second; "-" when zero.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Truncate(time.Second).Format(time.RFC3339)
}

// fmtEventTime is an event's time in local time, RFC 3339 with
// milliseconds: events of one run are often less than a second apart, and
// their order must be readable from the table.
func fmtEventTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
}

// fmtEventTimePtr is fmtEventTime for an optional time.
func fmtEventTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtEventTime(*t)
}

// fmtTimePtr is fmtTime for an optional time.
func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

// fmtLogTime is a log line's time: UTC with milliseconds.
func fmtLogTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// fmtDuration rounds d for display: milliseconds under a second, tenths
// under a minute, whole seconds above.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// elapsed is the duration from start to end, or to now while end is unset;
// "-" when it has not started.
func elapsed(start, end *time.Time, now time.Time) string {
	if start == nil || start.IsZero() {
		return "-"
	}
	if end == nil || end.IsZero() {
		return fmtDuration(now.Sub(*start))
	}
	return fmtDuration(end.Sub(*start))
}

// stateOrder orders TI states in compact counts: terminal outcomes first,
// then work in progress, then what has not started.
var stateOrder = []state.TI{
	state.TISuccess, state.TIFailed, state.TIUpstreamFailed, state.TICancelled, state.TISkipped,
	state.TIRunning, state.TIQueued, state.TIScheduled, state.TIUpForRetry, state.TINone,
}

// fmtCounts renders TI counts as "success=5 running=1"; "-" when empty.
func fmtCounts(counts map[string]int) string {
	rank := make(map[string]int, len(stateOrder))
	for i, s := range stateOrder {
		rank[string(s)] = i
	}
	keys := make([]string, 0, len(counts))
	for k, n := range counts {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, okI := rank[keys[i]]
		rj, okJ := rank[keys[j]]
		switch {
		case okI && okJ:
			return ri < rj
		case okI != okJ:
			return okI
		default:
			return keys[i] < keys[j]
		}
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(counts[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// maxCell bounds free-text table cells.
const maxCell = 120

// tableCell makes free text safe for a table cell: one line, no tabs, bounded,
// "-" when empty.
func tableCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}

// fmtOptInt renders an optional integer, "-" when unset.
func fmtOptInt[T int | int64](v *T) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(int64(*v), 10)
}

// parseRunID parses a RUN_ID argument: a positive integer, else a usage
// error naming RUN_ID.
func parseRunID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError("RUN_ID: %q must be a positive integer", s)
	}
	return id, nil
}
