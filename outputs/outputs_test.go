package outputs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
	}{
		{"empty file", "", map[string]string{}},
		{"one line", "count=3\n", map[string]string{"count": "3"}},
		{"no final newline", "count=3", map[string]string{"count": "3"}},
		{"value keeps = and <<", "q=a=b<<c\n", map[string]string{"q": "a=b<<c"}},
		{"empty value", "k=\n", map[string]string{"k": ""}},
		{"empty lines skipped", "\n\na=1\n\nb=2\n", map[string]string{"a": "1", "b": "2"}},
		{"CRLF", "a=1\r\nb=2\r\n", map[string]string{"a": "1", "b": "2"}},
		{"last wins", "a=1\nb=2\na=3\n", map[string]string{"a": "3", "b": "2"}},
		{"heredoc", "msg<<EOF\nline 1\nline 2\nEOF\nn=1\n", map[string]string{"msg": "line 1\nline 2", "n": "1"}},
		{"heredoc keeps CRLF inside", "msg<<EOF\r\nx\r\ny\r\nEOF\r\n", map[string]string{"msg": "x\r\ny"}},
		{"heredoc empty value", "msg<<EOF\nEOF\n", map[string]string{"msg": ""}},
		{"heredoc with empty lines", "msg<<EOF\n\nx\n\nEOF", map[string]string{"msg": "\nx\n"}},
		{"heredoc value holds key=value", "m<<END\na=1\nEND\n", map[string]string{"m": "a=1"}},
		{"heredoc delimiter with =", "m<<a=b\nx\na=b\n", map[string]string{"m": "x"}},
		{"= before << is key=value", "k=v<<EOF\n", map[string]string{"k": "v<<EOF"}},
		{"key with - and digits", "row-count_2=9\n", map[string]string{"row-count_2": "9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no separator", "a=1\njust text\n", `VIGIL_OUTPUT line 2: "just text": must be key=value or key<<DELIMITER`},
		{"empty key", "=1\n", `VIGIL_OUTPUT line 1: key "" must be a letter or '_', then letters, digits, '_' or '-', at most 128 bytes`},
		{"key with space", "a b=1\n", `VIGIL_OUTPUT line 1: key "a b" must be`},
		{"key starts with digit", "1a=1\n", `key "1a" must be`},
		{"key too long", strings.Repeat("k", 129) + "=1\n", `at most 128 bytes`},
		{"empty delimiter", "m<<\nx\n", `VIGIL_OUTPUT line 1: "m<<": the delimiter after << must not be empty`},
		{"missing delimiter", "m<<EOF\nx\n", `VIGIL_OUTPUT line 1: output m: no line "EOF" ends its value`},
		{"delimiter line without newline ends file", "m<<EOF\nx", `output m: the file ends before the delimiter line "EOF"`},
		{"NUL", "a=x\x00y\n", `VIGIL_OUTPUT line 1: output a: value must not contain a NUL byte`},
		{"not UTF-8", "a=\xff\n", `VIGIL_OUTPUT line 1: output a: value must be UTF-8 text`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseSizeLimit(t *testing.T) {
	// Exactly MaxBytes of key and value passes; one byte more fails with
	// the size and the limit.
	at := "k=" + strings.Repeat("v", MaxBytes-1) + "\n"
	out, err := Parse([]byte(at))
	require.NoError(t, err)
	assert.Equal(t, MaxBytes, Size(out))

	_, err = Parse([]byte("k=" + strings.Repeat("v", MaxBytes) + "\n"))
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, MaxBytes+1, tl.Bytes)
	assert.EqualError(t, err, "outputs are 65537 bytes of keys and values, over the limit of 65536 bytes per task instance")

	// A key repeated counts once, with its last value.
	big := strings.Repeat("k="+strings.Repeat("v", 60<<10)+"\n", 4)
	out, err = Parse([]byte(big))
	require.NoError(t, err)
	assert.Equal(t, 1+60<<10, Size(out))
}

func TestCheck(t *testing.T) {
	require.NoError(t, Check(nil))
	require.NoError(t, Check(map[string]string{"a": "1", "b-2": "x\ny"}))
	assert.EqualError(t, Check(map[string]string{"ok": "1", "bad key": "1"}),
		`output key "bad key": must be a letter or '_', then letters, digits, '_' or '-', at most 128 bytes`)
	assert.EqualError(t, Check(map[string]string{"a": "\x00"}), "output a: value must not contain a NUL byte")
	var tl *TooLargeError
	require.ErrorAs(t, Check(map[string]string{"k": strings.Repeat("v", MaxBytes)}), &tl)
	assert.Equal(t, MaxBytes+1, tl.Bytes)
	assert.Contains(t, (&TooLargeError{Bytes: 2 << 20, File: true}).Error(), "the VIGIL_OUTPUT file is 2097152 bytes, over its limit of 1048576 bytes")
}

func TestInputName(t *testing.T) {
	assert.Equal(t, "VIGIL_INPUT_LOAD_DB_ROW_COUNT", InputName("load-db", "row_count"))
	assert.Equal(t, "VIGIL_INPUT_EXTRACT_PATH", InputName("extract", "path"))
	assert.Equal(t, "VIGIL_INPUT_T_9_K_X", InputName("t.9", "k-x"))
}

func TestInputEnv(t *testing.T) {
	env, err := InputEnv(map[string]map[string]string{
		"extract": {"path": "/data/x.csv", "rows": "12"},
		"check":   {"ok": "true"},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"VIGIL_INPUT_EXTRACT_PATH": "/data/x.csv", "VIGIL_INPUT_EXTRACT_ROWS": "12", "VIGIL_INPUT_CHECK_OK": "true",
	}, env)

	env, err = InputEnv(nil)
	require.NoError(t, err)
	assert.Nil(t, env)

	// Task a's key b_c and task a_b's key c are one variable: refused,
	// naming both, whatever the map order.
	_, err = InputEnv(map[string]map[string]string{"a": {"b_c": "1"}, "a_b": {"c": "2"}})
	assert.EqualError(t, err, "inputs: VIGIL_INPUT_A_B_C would carry both output b_c of task a and output c of task a_b; rename one of the keys")
	_, err = InputEnv(map[string]map[string]string{"load": {"Row": "1", "row": "2"}})
	assert.ErrorContains(t, err, "VIGIL_INPUT_LOAD_ROW would carry both output Row of task load and output row of task load")

	// The sum of names and values is bounded.
	up := map[string]map[string]string{}
	for i := range 16 {
		up[fmt.Sprintf("t%02d", i)] = map[string]string{"v": strings.Repeat("x", MaxBytes-1)}
	}
	_, err = InputEnv(up)
	assert.ErrorContains(t, err, "over the limit of 1048576 bytes")
	delete(up, "t00")
	_, err = InputEnv(up)
	assert.NoError(t, err)
}

// format writes outputs as a VIGIL_OUTPUT file, each value as a heredoc
// with a delimiter that no line of it equals, or as key=value when it has
// no line break; the inverse of Parse.
func format(out map[string]string) []byte {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(out)) {
		v := out[k]
		if !strings.ContainsAny(v, "\r\n") {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
			continue
		}
		delim := "EOF"
		for i := 0; slices.Contains(strings.Split(strings.ReplaceAll(v, "\r\n", "\n"), "\n"), delim); i++ {
			delim = fmt.Sprintf("EOF%d", i)
		}
		fmt.Fprintf(&b, "%s<<%s\n%s\n%s\n", k, delim, v, delim)
	}
	return []byte(b.String())
}

// FuzzParse: Parse never panics; what it accepts passes Check (the
// server's test of what an agent sends), so an agent never ships outputs
// its server refuses; and a set of outputs written by format reads back
// unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte("a=1\nmsg<<EOF\nx\ny\nEOF\n"), "k", "v\nw")
	f.Add([]byte("a<<=\n=\n"), "_", "")
	f.Add([]byte("a=1\r\nb<<E\r\n\r\nE\r\n"), "k-1", "a\r\nb")
	f.Add([]byte("k<<EOF\nEOF"), "x", "EOF\nEOF0")
	f.Fuzz(func(t *testing.T, data []byte, key, value string) {
		out, err := Parse(data)
		if err == nil {
			require.NoError(t, Check(out), "Parse accepted what Check refuses: %q", data)
		} else {
			require.Nil(t, out)
		}
		m := map[string]string{key: value}
		if Check(m) != nil || strings.HasSuffix(value, "\r") {
			return // a trailing \r is the line break's, by the format's rule
		}
		got, err := Parse(format(m))
		require.NoError(t, err, "format wrote %q", format(m))
		require.Equal(t, m, got)
	})
}

func TestTooLargeIsTyped(t *testing.T) {
	var tl *TooLargeError
	assert.False(t, errors.As(Check(map[string]string{"a": "b"}), &tl))
}
