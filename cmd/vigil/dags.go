package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
)

func newDagsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dags",
		Short: "Apply and list DAG specs",
	}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(newDagsApplyCmd(o), newDagsListCmd(o))
	return cmd
}

func newDagsApplyCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "apply PATH...",
		Short: "Validate DAG spec files (or directories of *.yaml, *.yml) and apply them",
		Long: `Validate every spec locally first; if any file is invalid, report it and
apply nothing. Then send each spec to the server, which reports whether
it was created, updated or unchanged.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("%s needs at least one PATH (a spec file or a directory)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			files, err := loadSpecFiles(args)
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			results := make([]protocol.ApplyDAGResponse, 0, len(files))
			for _, f := range files {
				res, err := c.ApplyDAG(cmd.Context(), string(f.yaml))
				if err != nil {
					return fmt.Errorf("%s: apply dag %q: %w", f.path, f.dagID, err)
				}
				results = append(results, res)
				if !o.json() {
					fmt.Fprintf(out, "dag %s: %s\n", res.DAGID, res.Result)
				}
			}
			if o.json() {
				return printJSON(out, results)
			}
			return nil
		},
	}
}

// specFile is one validated spec file and its raw text.
type specFile struct {
	path  string
	dagID string
	yaml  []byte
}

// loadSpecFiles expands paths as dag.LoadPaths does (files as given,
// directories' *.yaml and *.yml sorted, not recursive, each file once),
// validates every file, and reads their text. Any bad file, or two files
// with one dag_id, fails the lot.
func loadSpecFiles(paths []string) ([]specFile, error) {
	var files []string
	seen := make(map[string]bool)
	add := func(p string) {
		key := filepath.Clean(p)
		if abs, err := filepath.Abs(p); err == nil {
			key = abs
		}
		if !seen[key] {
			seen[key] = true
			files = append(files, p)
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			add(p)
			continue
		}
		entries, err := os.ReadDir(p) // sorted by name
		if err != nil {
			return nil, err
		}
		found := false
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if ext != ".yaml" && ext != ".yml" {
				continue
			}
			file := filepath.Join(p, e.Name())
			if st, err := os.Stat(file); err == nil && st.IsDir() {
				continue
			}
			found = true
			add(file)
		}
		if !found {
			return nil, fmt.Errorf("%s: no DAG spec files (*.yaml, *.yml) in this directory", p)
		}
	}

	out := make([]specFile, 0, len(files))
	declared := make(map[string]string, len(files)) // dag_id -> file
	for _, f := range files {
		spec, err := dag.ParseFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w\nnothing applied", err)
		}
		if prev, dup := declared[spec.DAGID]; dup {
			return nil, fmt.Errorf("%s: dag %s: dag_id already declared in %s\nnothing applied", f, strconv.Quote(spec.DAGID), prev)
		}
		declared[spec.DAGID] = f
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, specFile{path: f, dagID: spec.DAGID, yaml: data})
	}
	return out, nil
}

func newDagsListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List applied DAGs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			dags, err := c.ListDAGs(cmd.Context())
			if err != nil {
				return err
			}
			if o.json() {
				if dags == nil {
					dags = []protocol.DAG{}
				}
				return printJSON(cmd.OutOrStdout(), dags)
			}
			tw := newTable(cmd.OutOrStdout())
			tableRow(tw, "DAG_ID", "TASKS", "UPDATED")
			for _, d := range dags {
				tableRow(tw, d.DAGID, strconv.Itoa(d.Tasks), fmtTime(d.UpdatedAt))
			}
			return tw.Flush()
		},
	}
}
