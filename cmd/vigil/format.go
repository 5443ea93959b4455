package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Output formats of -o/--output besides table and json (client.go).
const (
	outputYAML = "yaml" // the API's JSON shape, as YAML
	outputWide = "wide" // the table with more columns
	outputName = "name" // one identifier a line, for scripts
)

// outputFormats are the values -o accepts, in the order help lists them.
var outputFormats = []string{outputTable, outputJSON, outputYAML, outputWide, outputName}

// view is what a read command can show, in every -o format.
type view struct {
	// api is the value in the API's JSON shape: -o json and -o yaml print it.
	api any
	// table writes the table; wide asks for the extra columns of -o wide.
	table func(w io.Writer, wide bool) error
	// names are the identifiers -o name prints, one a line.
	names func() []string
}

// render writes v in the format -o asked for.
func (o *clientOpts) render(w io.Writer, v view) error { return renderOutput(o.output, w, v) }

// renderOutput writes v in format, one of outputFormats (validOutput).
func renderOutput(format string, w io.Writer, v view) error {
	switch format {
	case outputJSON:
		return printJSON(w, v.api)
	case outputYAML:
		return printYAML(w, v.api)
	case outputName:
		for _, n := range v.names() {
			fmt.Fprintln(w, n)
		}
		return nil
	default:
		return v.table(w, format == outputWide)
	}
}

// structured reports whether -o asks for data (json or yaml), not text.
func (o *clientOpts) structured() bool { return o.output == outputJSON || o.output == outputYAML }

// printData writes v as JSON or YAML, whichever -o asked for.
func (o *clientOpts) printData(w io.Writer, v any) error {
	if o.output == outputYAML {
		return printYAML(w, v)
	}
	return printJSON(w, v)
}

// printYAML writes v as YAML with the same keys, in the same order, as
// its JSON: v is encoded to JSON, which is YAML, and re-emitted in block
// style.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// blockStyle clears the flow and quoting styles that parsing JSON leaves
// on n and below; the encoder quotes a string where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// validOutput checks an -o value, naming the formats.
func validOutput(s string) error {
	for _, f := range outputFormats {
		if s == f {
			return nil
		}
	}
	return usageError("--output: %q must be one of %s", s, strings.Join(outputFormats, ", "))
}

// namesOf is a view's names: name of each item, in order. Every list
// command's -o name goes through it.
func namesOf[T any](items []T, name func(T) string) func() []string {
	return func() []string {
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = name(it)
		}
		return out
	}
}
