package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-sched/vigil/api/client"
	"github.com/vigil-sched/vigil/api/protocol"
)

// maxConfFile bounds a --conf-file: a conf has at most 64 keys
// (docs/params.md), far below this.
const maxConfFile = 1 << 20

// runConf builds a trigger's conf from --conf key=value pairs or from a
// --conf-file (a JSON or YAML mapping; JSON is YAML). The two are
// exclusive. Every error is a usage error (exit 2) naming the flag and,
// for a file, its path. Values from --conf are strings: the server parses
// them for int, float and bool params (docs/params.md).
func runConf(pairs []string, file string) (map[string]any, error) {
	if len(pairs) > 0 && file != "" {
		return nil, usageError("--conf and --conf-file are exclusive: give the parameters one way")
	}
	if file != "" {
		return confFile(file)
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	conf := make(map[string]any, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError("--conf %q: must be key=value", p)
		}
		if _, dup := conf[k]; dup {
			return nil, usageError("--conf %q: key %q is given twice", p, k)
		}
		conf[k] = v
	}
	return conf, nil
}

func confFile(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError("--conf-file: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfFile+1))
	if err != nil {
		return nil, usageError("--conf-file %s: %v", path, err)
	}
	if len(data) > maxConfFile {
		return nil, usageError("--conf-file %s: larger than %d bytes", path, maxConfFile)
	}
	var conf map[string]any
	if err := yaml.Unmarshal(data, &conf); err != nil {
		return nil, usageError("--conf-file %s: want a JSON or YAML mapping of key to value: %v", path, err)
	}
	if conf == nil {
		return nil, usageError("--conf-file %s: empty: want a JSON or YAML mapping of key to value", path)
	}
	return conf, nil
}

// rejected turns the server's 400 for bad input (a conf, a backfill
// range) into a usage error (exit 2) that carries the server's message,
// which names the field and the rule; other errors pass unchanged.
func rejected(what string, err error) error {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest {
		return &exitCodeError{code: exitUsage, err: fmt.Errorf("%s rejected: %w", what, err)}
	}
	return err
}

// printRunOrigin adds to a run's header how it came to be: its type, its
// slot for a scheduled or backfill run, and its conf as key=value pairs
// in key order (docs/schedules.md, docs/params.md).
func printRunOrigin(tw *tabwriter.Writer, r protocol.Run) {
	if r.RunType != "" {
		tableRow(tw, "Type:", r.RunType)
	}
	if r.LogicalDate != nil {
		tableRow(tw, "Logical date:", fmtTimePtr(r.LogicalDate))
		tableRow(tw, "Data interval:", fmtTimePtr(r.DataIntervalStart)+" to "+fmtTimePtr(r.DataIntervalEnd))
	}
	if len(r.Conf) > 0 {
		pairs := make([]string, 0, len(r.Conf))
		for _, k := range slices.Sorted(maps.Keys(r.Conf)) {
			v := fmt.Sprint(r.Conf[k])
			if f, ok := r.Conf[k].(float64); ok {
				v = strconv.FormatFloat(f, 'f', -1, 64) // 1000000, not 1e+06
			}
			pairs = append(pairs, k+"="+v)
		}
		tableRow(tw, "Conf:", tableCell(strings.Join(pairs, " ")))
	}
}
