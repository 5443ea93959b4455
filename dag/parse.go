package dag

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on the YAML structure. MaxSpecBytes alone does not bound the
// decoding work: aliases expand a small document into a large one (the
// library stops only after about 400k alias-driven nodes), and the library
// checks each mapping's keys for duplicates pairwise, in time quadratic in
// the keys. With these bounds a hostile 1 MiB input decodes in a fraction
// of a second; no sensible spec comes near them.
const (
	// maxNodes caps YAML nodes after alias expansion. An alias-free 1 MiB
	// document has well under this many.
	maxNodes = 1 << 20
	// maxMappingKeys caps the keys of one mapping. Only env can
	// legitimately be large, and Validate caps it at MaxEnvVars anyway.
	maxMappingKeys = MaxEnvVars
)

// Parse decodes one YAML document into a Spec, applies the defaults
// (Spec.ApplyDefaults) and validates it (Spec.Validate).
//
// Decoding is strict. Unknown fields, wrong types, repeated keys and bad
// durations (malformed or negative) are reported together, each naming
// its line and, where it can be located, the task and field, e.g.
// `dag "etl": task "load": retry_delay: line 12: invalid duration "-5s":
// must not be negative`. YAML syntax errors carry the library's line
// number. A spec that decodes but breaks a rule of docs/design.md §9 yields a
// *ValidationError listing every problem.
//
// Parse rejects input over MaxSpecBytes, empty input, more than one
// non-empty YAML document, more than MaxTasks tasks, mappings with more
// than MaxEnvVars keys, and aliases that expand the document past about a
// million nodes or into itself.
func Parse(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, tooLarge(int64(len(data)))
	}
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, decodeError(s.DAGID, root, te.Errors)
		}
		return nil, err
	}
	s.ApplyDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func tooLarge(n int64) error {
	return fmt.Errorf("DAG spec is %d bytes, over the 1 MiB limit (%d bytes)", n, MaxSpecBytes)
}

// ParseFile reads and parses the spec in the named file. Parse errors are
// prefixed with the path on every line ("path: dag ...: ..."); they still
// unwrap to what Parse returned, e.g. a *ValidationError.
func ParseFile(path string) (*Spec, error) {
	f, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return f.Spec, nil
}

// File is one parsed spec file: its path, its spec and its raw text (what
// `vigil dags apply` sends to the server).
type File struct {
	Path string
	Spec *Spec
	Data []byte
}

func readFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err // *fs.PathError names the path
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxSpecBytes {
		return File{}, &fileError{path, tooLarge(st.Size())}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return File{}, err // *fs.PathError names the path
	}
	s, err := Parse(data)
	if err != nil {
		return File{}, &fileError{path, err}
	}
	return File{Path: path, Spec: s, Data: data}, nil
}

// fileError prefixes every line of a (possibly multi-line) error with a
// path, the way compilers do, so each problem can be traced to its file.
type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	for i, l := range lines {
		lines[i] = e.path + ": " + l
	}
	return strings.Join(lines, "\n")
}

func (e *fileError) Unwrap() error { return e.err }

// LoadPaths parses the specs at paths, in order. A file is parsed whatever
// its name; a directory contributes its *.yaml and *.yml files, sorted by
// name, without descending into subdirectories. A file reached twice is
// parsed once. LoadPaths fails on the first file that does not parse, and
// when two files declare the same dag_id; the error names both files. No
// paths, or only directories without specs, yield an empty result.
func LoadPaths(paths ...string) ([]*Spec, error) {
	files, err := LoadFiles(paths...)
	if err != nil {
		return nil, err
	}
	specs := make([]*Spec, len(files))
	for i, f := range files {
		specs[i] = f.Spec
	}
	return specs, nil
}

// LoadFiles is LoadPaths keeping each file's path and raw text. Every
// bad file is reported (errors.Join), not only the first, and then no
// file is returned.
func LoadFiles(paths ...string) ([]File, error) {
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
		entries, err := os.ReadDir(p) // sorted by file name
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if ext != ".yaml" && ext != ".yml" {
				continue
			}
			file := filepath.Join(p, e.Name())
			if st, err := os.Stat(file); err == nil && st.IsDir() {
				continue
			}
			add(file)
		}
	}
	out := make([]File, 0, len(files))
	declared := make(map[string]string, len(files)) // dag_id -> file
	var errs []error                                // every bad file, not only the first
	for _, path := range files {
		f, err := readFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := declared[f.Spec.DAGID]; dup {
			errs = append(errs, fmt.Errorf("%s: %s: dag_id already declared in %s", path, dagRef(f.Spec.DAGID), prev))
			continue
		}
		declared[f.Spec.DAGID] = path
		out = append(out, f)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parseTree parses data into a node tree, without decoding, to check that
// it holds exactly one document of bounded size; the tree also locates
// decode errors. Decoding into a yaml.Node neither expands aliases nor
// checks keys, so this pass is linear.
func parseTree(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty DAG spec: want a YAML document with dag_id and tasks")
		}
		return nil, err
	}
	for {
		// Empty documents after the spec (a trailing "---") are harmless;
		// a second spec in the same input is an error, not something to
		// drop silently.
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !emptyDocument(&extra) {
			return nil, fmt.Errorf("yaml: line %d: a second YAML document; a DAG spec holds exactly one", extra.Line)
		}
	}
	c := sizer{memo: make(map[*yaml.Node]int)}
	if _, err := c.size(&doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

func emptyDocument(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return len(doc.Content) == 1 && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// sizer counts the nodes of a tree as the decoder will see them, with
// aliases expanded. Only anchored nodes can be reached twice, so only
// they are memoized; that keeps the count linear in the input.
type sizer struct {
	memo  map[*yaml.Node]int // anchored node -> size; -1 while being counted
	total int
}

func (c *sizer) size(n *yaml.Node) (int, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Anchor != "" {
		switch v, ok := c.memo[n]; {
		case ok && v < 0:
			return 0, fmt.Errorf("yaml: line %d: anchor %s contains an alias to itself", n.Line, quote(n.Anchor))
		case ok:
			if c.total += v; c.total > maxNodes {
				return 0, errTooManyNodes
			}
			return v, nil
		}
		c.memo[n] = -1
	}
	if n.Kind == yaml.MappingNode && len(n.Content)/2 > maxMappingKeys {
		return 0, fmt.Errorf("yaml: line %d: a mapping with %d keys; the limit is %d", n.Line, len(n.Content)/2, maxMappingKeys)
	}
	c.total++
	if c.total > maxNodes {
		return 0, errTooManyNodes
	}
	sum := 1
	for _, ch := range n.Content {
		k, err := c.size(ch)
		if err != nil {
			return 0, err
		}
		sum += k
	}
	if n.Anchor != "" {
		c.memo[n] = sum
	}
	return sum, nil
}

var errTooManyNodes = fmt.Errorf("yaml: the document expands to more than %d nodes (check its aliases)", maxNodes)

// Decode errors from the YAML library carry a line but not the field. The
// patterns below pick them apart so that decodeError can add the field.
var (
	lineMsg       = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	unknownField  = regexp.MustCompile(`(?s)^field (.*) not found in type (\S+)$`)
	repeatedKey   = regexp.MustCompile(`^mapping key ("(?:[^"\\]|\\.)*") already defined at line (\d+)$`)
	unmarshalTag  = regexp.MustCompile(`^cannot unmarshal (\S+)`)
	wrongType     = regexp.MustCompile("^cannot unmarshal (\\S+) (`[^`]*`|) ?into (\\S+)$")
	backtickValue = regexp.MustCompile("`([^`]*)`")
	durationValue = regexp.MustCompile(`^invalid duration ("(?:[^"\\]|\\.)*")(\.\.\.)?`)
)

// fieldLists names the fields of the decoded struct types, for the hint
// after an unknown field.
var fieldLists = map[string]string{
	reflect.TypeFor[Spec]().String(): "DAG fields: " + yamlFields(reflect.TypeFor[Spec]()),
	reflect.TypeFor[Task]().String(): "task fields: " + yamlFields(reflect.TypeFor[Task]()),
}

func yamlFields(t reflect.Type) string {
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// decodeError turns the library's decode messages into one error per
// problem, adding the DAG (when dag_id decoded) and the field path.
func decodeError(dagID string, root *yaml.Node, msgs []string) error {
	ix := make(nodeIndex)
	ix.walkDoc(root)
	prefix := ""
	if dagID != "" {
		prefix = dagRef(dagID) + ": "
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = errors.New(prefix + ix.explain(m))
	}
	return errors.Join(errs...)
}

// nodeIndex maps a line to the YAML nodes that start on it.
type nodeIndex map[int][]nodeEntry

type nodeEntry struct {
	key  bool   // a mapping key; path is then the mapping's path
	text string // the node's scalar text ("" for collections)
	tag  string // the node's short tag, e.g. "!!str"
	path string // e.g. `task "load": retry_delay`, `task "load": command[0]`
}

func (ix nodeIndex) add(n *yaml.Node, key bool, path string) {
	ix[n.Line] = append(ix[n.Line], nodeEntry{key: key, text: n.Value, tag: n.ShortTag(), path: path})
}

func (ix nodeIndex) walkDoc(doc *yaml.Node) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		ix.add(k, true, "")
		ix.add(v, false, k.Value)
		if k.Value != "tasks" || v.Kind != yaml.SequenceNode {
			ix.walk(v, k.Value)
			continue
		}
		for j, t := range v.Content {
			p := taskPath(t, j)
			ix.add(t, false, p)
			ix.walk(t, p)
		}
	}
}

// walk indexes the children of n, whose own path is path. Aliases are not
// followed: their targets are indexed where they are written.
func (ix nodeIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + ": " + k.Value
			}
			ix.add(k, true, path)
			ix.add(v, false, p)
			ix.walk(v, p)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			ix.add(e, false, p)
			ix.walk(e, p)
		}
	}
}

// taskPath names the i-th element of tasks the way Problem does.
func taskPath(n *yaml.Node, i int) string {
	if n.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k, v := n.Content[j], n.Content[j+1]; k.Value == "id" && v.Kind == yaml.ScalarNode {
				return taskRef(v.Value, i)
			}
		}
	}
	return taskRef("", i)
}

// explain rewrites one library message ("line N: ...") as
// "PATH: line N: ...", or returns it unchanged when the node it is about
// cannot be told apart from others on the same line.
func (ix nodeIndex) explain(msg string) string {
	m := lineMsg.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	rest := m[2]
	entries := ix[line]

	if f := unknownField.FindStringSubmatch(rest); f != nil {
		out := fmt.Sprintf("line %d: unknown field %s", line, quote(f[1]))
		if hint, ok := fieldLists[f[2]]; ok {
			out += " (" + hint + ")"
		}
		return inPath(keyPath(entries, f[1]), out)
	}
	if r := repeatedKey.FindStringSubmatch(rest); r != nil {
		name, _ := strconv.Unquote(r[1])
		out := fmt.Sprintf("line %d: field %s repeated (first at line %s)", line, quote(name), r[2])
		return inPath(keyPath(entries, name), out)
	}

	var values []nodeEntry
	for _, e := range entries {
		if !e.key {
			values = append(values, e)
		}
	}
	if t := unmarshalTag.FindStringSubmatch(rest); t != nil {
		values = narrow(values, func(e nodeEntry) bool { return e.tag == t[1] })
	}
	if b := backtickValue.FindStringSubmatch(rest); b != nil {
		shown, cut := strings.CutSuffix(b[1], "...")
		values = narrow(values, func(e nodeEntry) bool { return textMatches(e.text, shown, cut) })
	}
	if d := durationValue.FindStringSubmatch(rest); d != nil {
		if shown, err := strconv.Unquote(d[1]); err == nil {
			cut := d[2] != ""
			values = narrow(values, func(e nodeEntry) bool { return textMatches(e.text, shown, cut) })
		}
	}
	path := outermost(values)
	return inPath(path, "line "+m[1]+": "+wrongShape(path, rest))
}

// wrongShape rewords the library's "cannot unmarshal !!str `x` into
// []string" as the rule the field has, with an example (docs/dag-spec.md):
// a command written as one string is the common case.
func wrongShape(path, rest string) string {
	w := wrongType.FindStringSubmatch(rest)
	if w == nil {
		return rest
	}
	got := yamlKind(strings.TrimPrefix(w[1], "!!"))
	if w[2] != "" {
		got += " " + w[2]
	}
	switch {
	case w[3] == "[]string" && (path == "command" || strings.HasSuffix(path, ": command")):
		return fmt.Sprintf("command must be a list of strings (the argv, run without a shell), not a %s: "+
			`write command: ["echo", "hi"], or command: ["sh", "-c", "echo hi"] for a shell`, got)
	case w[3] == "[]string":
		return fmt.Sprintf("must be a list of strings, e.g. [a, b], not a %s", got)
	case w[3] == "map[string]string":
		return fmt.Sprintf(`must be a mapping of names to string values, e.g. {REGION: "eu", LIMIT: "500"}, not a %s`, got)
	case w[3] == "map[string]dag.EnvValue":
		return fmt.Sprintf(`must be a mapping of names to string values or {secret: NAME}, e.g. {REGION: "eu", DB_PASSWORD: {secret: db_password}}, not a %s`, got)
	}
	return rest
}

// yamlKind names a YAML short tag (without "!!") in words.
func yamlKind(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	case "int", "float", "bool":
		return tag
	}
	return tag + " value"
}

func inPath(path, msg string) string {
	if path == "" {
		return msg
	}
	return path + ": " + msg
}

// keyPath returns the path of the mapping holding key name on this line,
// if exactly one such mapping does.
func keyPath(entries []nodeEntry, name string) string {
	path, found := "", 0
	for _, e := range entries {
		if e.key && e.text == name && (found == 0 || e.path != path) {
			path = e.path
			found++
		}
	}
	if found != 1 {
		return ""
	}
	return path
}

// narrow keeps the entries that satisfy keep, unless none do: a filter
// that matches nothing tells nothing.
func narrow(entries []nodeEntry, keep func(nodeEntry) bool) []nodeEntry {
	var out []nodeEntry
	for _, e := range entries {
		if keep(e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return entries
	}
	return out
}

func textMatches(text, shown string, cut bool) bool {
	if cut {
		return strings.HasPrefix(text, shown)
	}
	return text == shown
}

// outermost returns the path of the entry that contains all the others
// (e.g. a sequence whose first element is on the same line), or "" when
// the entries are unrelated and the error cannot be pinned on one.
func outermost(entries []nodeEntry) string {
	if len(entries) == 0 {
		return ""
	}
	best := entries[0].path
	for _, e := range entries[1:] {
		if len(e.path) < len(best) {
			best = e.path
		}
	}
	for _, e := range entries {
		if e.path != best && !strings.HasPrefix(e.path, best+": ") && !strings.HasPrefix(e.path, best+"[") {
			return ""
		}
	}
	return best
}
