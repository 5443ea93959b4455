package main

// Reading figures: the vigil process's Prometheus metrics (per-pass
// histograms of the tick and each reaper), PostgreSQL's statistics views,
// and percentiles of request latencies.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// metricsSnap maps one exposition line's series ("name{labels}") to its value.
type metricsSnap map[string]float64

// scrape reads GET base/metrics (text format).
func scrape(ctx context.Context, base string) (metricsSnap, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(bufio.NewScanner(resp.Body))
}

// parseMetrics reads the text exposition format's sample lines.
func parseMetrics(sc *bufio.Scanner) (metricsSnap, error) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	m := metricsSnap{}
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: line %q: %w", line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// histMean is the mean of the observations a histogram series (name, with
// its labels as exposed, e.g. `{reaper="orphan"}`) got between two
// snapshots, and how many there were.
func histMean(before, after metricsSnap, name, labels string) (time.Duration, int) {
	n := after[name+"_count"+labels] - before[name+"_count"+labels]
	if n <= 0 {
		return 0, 0
	}
	sum := after[name+"_sum"+labels] - before[name+"_sum"+labels]
	return time.Duration(sum / n * float64(time.Second)), int(n)
}

// tableStats are task_instances' cumulative update counters.
type tableStats struct{ Upd, HotUpd int64 }

func readTIStats(ctx context.Context, conn *pgx.Conn) (tableStats, error) {
	var s tableStats
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return s, err
	}
	err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'task_instances'`).
		Scan(&s.Upd, &s.HotUpd)
	return s, err
}

// percentile is the p-th percentile (0 < p ≤ 100, nearest rank) of ds,
// which it sorts; 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	rank := int(p/100*float64(len(ds))+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// statement is one row of pg_stat_statements.
type statement struct {
	Calls   int64
	TotalMS float64
	MeanMS  float64
	Rows    int64
	// WALBytes is the WAL the statement's calls wrote (wal_bytes).
	WALBytes float64
	Query    string
}

// topStatements returns the n statements with the most total execution
// time since the last reset, in this database.
func topStatements(ctx context.Context, conn *pgx.Conn, n int) ([]statement, error) {
	rows, err := conn.Query(ctx, `
		SELECT calls, total_exec_time, mean_exec_time, rows, wal_bytes::float8, regexp_replace(query, '\s+', ' ', 'g')
		  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		 ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (statement, error) {
		var s statement
		return s, r.Scan(&s.Calls, &s.TotalMS, &s.MeanMS, &s.Rows, &s.WALBytes, &s.Query)
	})
}
