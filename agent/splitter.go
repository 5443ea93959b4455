package agent

import (
	"bytes"
	"unicode/utf8"
)

// maxLineBytes is the longest log line the agent emits; longer lines are
// split so one runaway line cannot exhaust memory or a request body.
const maxLineBytes = 64 << 10

// lineSplitter is an io.Writer that cuts a byte stream into lines and hands
// each to emit without its "\n" (or "\r\n"). A line longer than max bytes is
// emitted in pieces of at most max bytes, cut on a UTF-8 boundary when the
// input is valid UTF-8. Flush emits a trailing partial line. A splitter
// serves one stream and is not safe for concurrent use (os/exec copies each
// pipe from a single goroutine).
type lineSplitter struct {
	max  int
	emit func(line string)
	buf  []byte
}

// newLineSplitter returns a splitter with the given maximum line length.
func newLineSplitter(max int, emit func(string)) *lineSplitter {
	return &lineSplitter{max: max, emit: emit}
}

// Write buffers p and emits every complete line. It never fails.
func (s *lineSplitter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	rest := s.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		switch {
		case i >= 0 && (i <= s.max || (i == s.max+1 && rest[s.max] == '\r')):
			s.emit(string(bytes.TrimSuffix(rest[:i], []byte{'\r'})))
			rest = rest[i+1:]
		case len(rest) > s.max:
			cut := cutPoint(rest, s.max)
			s.emit(string(rest[:cut]))
			rest = rest[cut:]
		default:
			// Keep the partial line at the front of buf so it does not grow.
			n := copy(s.buf, rest)
			s.buf = s.buf[:n]
			return len(p), nil
		}
	}
}

// Flush emits the buffered partial line, if any.
func (s *lineSplitter) Flush() {
	if len(s.buf) > 0 {
		s.emit(string(s.buf))
		s.buf = s.buf[:0]
	}
}

// cutPoint returns where to split b (len(b) > max): at most max bytes, moved
// back over UTF-8 continuation bytes so a rune is not cut in two.
func cutPoint(b []byte, max int) int {
	for cut := max; cut > max-utf8.UTFMax && cut > 0; cut-- {
		if utf8.RuneStart(b[cut]) {
			return cut
		}
	}
	return max // not UTF-8: cut anywhere
}
