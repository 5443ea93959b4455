// Package outputs holds the rules of task outputs (docs/task-environment.md,
// "Outputs"): the format of the file a task's VIGIL_OUTPUT names, which
// follows GitHub Actions' GITHUB_OUTPUT, the key rule, the size limit of
// one task instance's outputs, and the names of the VIGIL_INPUT_*
// variables that carry them to the task's direct downstreams. It is pure:
// the agent parses with it, and the server checks what an agent sends
// with the same functions, since agents are not trusted to.
package outputs

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of task outputs (docs/task-environment.md, "Outputs").
const (
	// MaxBytes bounds one task instance's outputs: the sum of the bytes of
	// every key and value after parsing (a repeated key counts once, with
	// its last value). A task that writes more fails output_too_large.
	MaxBytes = 64 << 10
	// MaxFileBytes bounds the VIGIL_OUTPUT file the agent reads: larger
	// than this and the try fails output_too_large without the file being
	// parsed. It leaves room for the syntax around MaxBytes of keys and
	// values, and for keys written more than once.
	MaxFileBytes = 1 << 20
	// MaxKeyLen bounds a key, in bytes.
	MaxKeyLen = 128
	// MaxInputBytes bounds the VIGIL_INPUT_* variables one task instance
	// receives: the sum of the bytes of their names and values. Linux caps
	// a process's whole environment and arguments at a quarter of its
	// stack limit (2 MiB by default), and one variable at 128 KiB.
	MaxInputBytes = 1 << 20
)

// KeyRule is the shape of an output key, for error messages: GitHub's
// output names, bounded.
const KeyRule = "a letter or '_', then letters, digits, '_' or '-', at most 128 bytes"

// ValidKey reports whether k follows KeyRule.
func ValidKey(k string) bool {
	if k == "" || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case (c == '-' || c >= '0' && c <= '9') && i > 0:
		default:
			return false
		}
	}
	return true
}

// Size is what MaxBytes bounds: the bytes of every key and value of out.
func Size(out map[string]string) int {
	n := 0
	for k, v := range out {
		n += len(k) + len(v)
	}
	return n
}

// TooLargeError is an output set over MaxBytes. Its message names the
// size and the limit; it is the message of the try's output_too_large
// failure.
type TooLargeError struct {
	Bytes int  // the size: Size of the outputs, or the file's bytes with File
	File  bool // the VIGIL_OUTPUT file itself was over MaxFileBytes
}

func (e *TooLargeError) Error() string {
	if e.File {
		return fmt.Sprintf("the VIGIL_OUTPUT file is %d bytes, over its limit of %d bytes (outputs are limited to %d bytes of keys and values)",
			e.Bytes, MaxFileBytes, MaxBytes)
	}
	return fmt.Sprintf("outputs are %d bytes of keys and values, over the limit of %d bytes per task instance", e.Bytes, MaxBytes)
}

// Check validates outputs as an agent sends them: each key follows
// KeyRule, each value is UTF-8 without NUL, and the whole is at most
// MaxBytes (*TooLargeError). The error names the key and the rule.
func Check(out map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(out)) {
		if !ValidKey(k) {
			return fmt.Errorf("output key %q: must be %s", k, KeyRule)
		}
		if err := checkValue(out[k]); err != nil {
			return fmt.Errorf("output %s: %w", k, err)
		}
	}
	if n := Size(out); n > MaxBytes {
		return &TooLargeError{Bytes: n}
	}
	return nil
}

func checkValue(v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("value must be UTF-8 text")
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("value must not contain a NUL byte")
	}
	return nil
}

// Parse reads a VIGIL_OUTPUT file, GitHub Actions' GITHUB_OUTPUT format:
// each line is `key=value` (the value is the rest of the line, '='
// included) or `key<<DELIMITER`, whose value is the lines that follow up
// to a line equal to DELIMITER, joined by their own line breaks. A line
// ending "\r\n" counts as ending "\n". Empty lines are skipped; a key
// written twice takes its last value, as GitHub does. Errors name the line
// (from 1) and the rule: a line that is neither form, a key not following
// KeyRule, a missing delimiter, a value that is not UTF-8 or holds NUL,
// and outputs over MaxBytes (*TooLargeError, after the whole file parsed).
func Parse(data []byte) (map[string]string, error) {
	out := map[string]string{}
	p := lineReader{data: data}
	for {
		line, ok := p.next()
		if !ok {
			break
		}
		if len(line.text) == 0 {
			continue
		}
		key, value, err := p.entry(line)
		if err != nil {
			return nil, fmt.Errorf("VIGIL_OUTPUT line %d: %w", line.no, err)
		}
		if !ValidKey(key) {
			return nil, fmt.Errorf("VIGIL_OUTPUT line %d: key %q must be %s", line.no, key, KeyRule)
		}
		if err := checkValue(value); err != nil {
			return nil, fmt.Errorf("VIGIL_OUTPUT line %d: output %s: %w", line.no, key, err)
		}
		out[key] = value
	}
	if n := Size(out); n > MaxBytes {
		return nil, &TooLargeError{Bytes: n}
	}
	return out, nil
}

// line is one line of the file: its text without the line break, where
// its break ends, and its number from 1.
type line struct {
	text []byte
	end  int // offset just past the line break (len(data) at the end)
	brk  int // length of the line break: 0 (last line), 1 or 2
	no   int
}

type lineReader struct {
	data []byte
	pos  int
	no   int
}

// next returns the next line; ok is false at the end of the data.
func (r *lineReader) next() (line, bool) {
	if r.pos >= len(r.data) {
		return line{}, false
	}
	r.no++
	rest := r.data[r.pos:]
	l := line{no: r.no}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		l.text, l.brk = rest[:i], 1
		if i > 0 && rest[i-1] == '\r' {
			l.text, l.brk = rest[:i-1], 2
		}
		r.pos += i + 1
	} else {
		l.text = rest
		r.pos = len(r.data)
	}
	l.end = r.pos
	return l, true
}

// entry reads the entry that starts at l: `key=value` when '=' comes
// before any "<<", else `key<<DELIMITER` and the lines up to DELIMITER.
func (r *lineReader) entry(l line) (key, value string, err error) {
	eq := bytes.IndexByte(l.text, '=')
	hd := bytes.Index(l.text, []byte("<<"))
	switch {
	case eq >= 0 && (hd < 0 || eq < hd):
		return string(l.text[:eq]), string(l.text[eq+1:]), nil
	case hd >= 0:
		key, delim := string(l.text[:hd]), string(l.text[hd+2:])
		if delim == "" {
			return "", "", fmt.Errorf("%q: the delimiter after << must not be empty", clip(l.text))
		}
		start, end := l.end, l.end
		for {
			v, ok := r.next()
			if !ok {
				return "", "", fmt.Errorf("output %s: no line %q ends its value", key, delim)
			}
			if string(v.text) == delim {
				return key, string(r.data[start:end]), nil
			}
			if v.brk == 0 {
				return "", "", fmt.Errorf("output %s: the file ends before the delimiter line %q", key, delim)
			}
			end = v.end - v.brk
		}
	}
	return "", "", fmt.Errorf("%q: must be key=value or key<<DELIMITER", clip(l.text))
}

// clip shortens a line quoted in an error to 80 bytes.
func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
