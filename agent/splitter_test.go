package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func collect(max int) (*lineSplitter, *[]string) {
	var got []string
	return newLineSplitter(max, func(l string) { got = append(got, l) }), &got
}

func TestSplitterLinesAcrossWrites(t *testing.T) {
	t.Parallel()
	s, got := collect(64)
	for _, chunk := range []string{"hel", "lo\nwor", "ld\r\n", "\n", "tail"} {
		n, err := s.Write([]byte(chunk))
		assert.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	assert.Equal(t, []string{"hello", "world", ""}, *got)
	s.Flush()
	assert.Equal(t, []string{"hello", "world", "", "tail"}, *got, "partial last line flushed")
	s.Flush()
	assert.Len(t, *got, 4, "flush is idempotent")
}

func TestSplitterSplitsLongLines(t *testing.T) {
	t.Parallel()
	s, got := collect(4)
	_, _ = s.Write([]byte("abcdefghij\nxy\nabcd\n"))
	assert.Equal(t, []string{"abcd", "efgh", "ij", "xy", "abcd"}, *got)
}

func TestSplitterExactMaxWithCRLF(t *testing.T) {
	t.Parallel()
	s, got := collect(4)
	_, _ = s.Write([]byte("abcd\r\nefgh"))
	s.Flush()
	assert.Equal(t, []string{"abcd", "efgh"}, *got, "no empty piece from the \\r")
}

func TestSplitterKeepsRunesWhole(t *testing.T) {
	t.Parallel()
	s, got := collect(5)
	_, _ = s.Write([]byte("abcé€\n")) // é is 2 bytes, € is 3
	assert.Equal(t, []string{"abcé", "€"}, *got)
}

func TestSplitterDefaultMax(t *testing.T) {
	t.Parallel()
	s, got := collect(maxLineBytes)
	long := strings.Repeat("x", maxLineBytes*2+10)
	_, _ = s.Write([]byte(long + "\nend"))
	s.Flush()
	assert.Len(t, *got, 4)
	assert.Len(t, (*got)[0], maxLineBytes)
	assert.Len(t, (*got)[1], maxLineBytes)
	assert.Equal(t, strings.Repeat("x", 10), (*got)[2])
	assert.Equal(t, "end", (*got)[3])
	assert.LessOrEqual(t, cap(s.buf), 3*maxLineBytes+16)
}
