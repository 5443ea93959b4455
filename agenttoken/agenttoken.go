// Package agenttoken reads the agent tokens file (`vigil server` and
// `vigil lite` --agent-tokens-file): agent tokens each limited to a list
// of tags, so that a stolen token buys only the tags of its hosts
// (docs/security.md). The file is a YAML list:
//
//   - name: cpu-pool
//     token_sha256: <64 hex digits: the SHA-256 of the token>
//     tags: [cpu]
//
// An agent that presents such a token may register only tags of its list,
// and claims only while its registered tags stay within it. The plain
// --agent-token stays the token for all tags. The file holds hashes, not
// tokens: reading it gives no one a token.
//
// A Set rereads the file on demand (SIGHUP) and when its modification
// time or size changes (Watch polls them); a reread that fails keeps the
// previous good entries and logs why. Replace the file atomically (write
// a new one, then rename it over the old): a reread may otherwise see it
// half-written.
package agenttoken

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Bounds of the file, so that a mistaken path (a log, a binary) fails
// fast and clearly rather than being parsed at length.
const (
	// MaxFileBytes bounds the file's size.
	MaxFileBytes = 1 << 20
	// MaxEntries bounds its entries.
	MaxEntries = 1000
	// MaxTags and MaxTagBytes bound one entry's tags, as an agent's own
	// tags are bounded.
	MaxTags     = 64
	MaxTagBytes = 64
	// MaxNameBytes bounds an entry's name.
	MaxNameBytes = 128
)

// DefaultPollInterval is how often Watch checks the file for a change.
const DefaultPollInterval = 2 * time.Second

// Entry is one scoped token.
type Entry struct {
	// Name identifies the token in logs and refusals; never the token.
	Name string `yaml:"name"`
	// TokenSHA256 is the hex SHA-256 of the token, 64 digits.
	TokenSHA256 string `yaml:"token_sha256"`
	// Tags are the only tags an agent with this token may register.
	Tags []string `yaml:"tags"`

	sum [sha256.Size]byte
}

// Allows reports whether tag is in the entry's list.
func (e *Entry) Allows(tag string) bool { return slices.Contains(e.Tags, tag) }

// Outside returns the first of tags not in the entry's list, if any.
func (e *Entry) Outside(tags []string) (string, bool) {
	for _, t := range tags {
		if !e.Allows(t) {
			return t, true
		}
	}
	return "", false
}

// Parse reads the file's content; path only names it in errors. Each
// error names the file, the entry (its position from 1, and its name when
// it has one) and the field, with the rule broken.
func Parse(path string, data []byte) ([]Entry, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("agent tokens file %s: %d bytes, more than %d", path, len(data), MaxFileBytes)
	}
	var entries []Entry
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("agent tokens file %s: %v (want a YAML list of {name, token_sha256, tags})", path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("agent tokens file %s: no entries; an empty file is refused, as a half-written one would be "+
			"(to drop every scoped token, leave out --agent-tokens-file)", path)
	}
	if len(entries) > MaxEntries {
		return nil, fmt.Errorf("agent tokens file %s: %d entries, more than %d", path, len(entries), MaxEntries)
	}
	names, sums := map[string]int{}, map[[sha256.Size]byte]int{}
	for i := range entries {
		e := &entries[i]
		where := fmt.Sprintf("agent tokens file %s: entry %d", path, i+1)
		if e.Name != "" {
			where += fmt.Sprintf(" (%q)", e.Name)
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if j, dup := names[e.Name]; dup {
			return nil, fmt.Errorf("%s: name: also the name of entry %d; names must be unique", where, j)
		}
		if j, dup := sums[e.sum]; dup {
			return nil, fmt.Errorf("%s: token_sha256: also the hash of entry %d; one token has one list of tags", where, j)
		}
		names[e.Name], sums[e.sum] = i+1, i+1
	}
	return entries, nil
}

// check validates one entry and fills its sum.
func (e *Entry) check() error {
	switch {
	case e.Name == "":
		return errors.New("name: required")
	case len(e.Name) > MaxNameBytes || !utf8.ValidString(e.Name) || strings.ContainsFunc(e.Name, isControl):
		return fmt.Errorf("name: must be at most %d bytes of printable UTF-8", MaxNameBytes)
	}
	raw, err := hex.DecodeString(e.TokenSHA256)
	if err != nil || len(raw) != sha256.Size {
		return fmt.Errorf("token_sha256: must be %d hex digits, the SHA-256 of the token (sha256sum), got %d characters",
			2*sha256.Size, len(e.TokenSHA256))
	}
	copy(e.sum[:], raw)
	switch {
	case len(e.Tags) == 0:
		return errors.New("tags: required: the list of tags this token may register (the plain --agent-token serves all tags)")
	case len(e.Tags) > MaxTags:
		return fmt.Errorf("tags: at most %d, got %d", MaxTags, len(e.Tags))
	}
	for j, t := range e.Tags {
		if t == "" || len(t) > MaxTagBytes || !utf8.ValidString(t) || strings.ContainsFunc(t, isControl) {
			return fmt.Errorf("tags[%d]: %q must be 1 to %d bytes of printable UTF-8", j, t, MaxTagBytes)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Set is the scoped tokens in effect, safe for concurrent use.
type Set struct {
	path string
	log  *slog.Logger

	entries atomic.Pointer[[]Entry]
	mu      sync.Mutex // serializes rereads
	stamp   fileStamp  // of the last read, good or bad; guarded by mu
}

// fileStamp is what Watch compares to notice a change.
type fileStamp struct {
	mod  time.Time
	size int64
}

// Load reads path into a new Set. A file that cannot be read or parsed
// is an error: at start, a bad file stops the server.
func Load(path string, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{path: path, log: log}
	if err := s.read(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the file's path.
func (s *Set) Path() string { return s.path }

// read parses the file and, when it is good, puts it in effect.
func (s *Set) read() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("agent tokens file: %w", err)
	}
	s.stamp = fileStamp{fi.ModTime(), fi.Size()}
	data, err := readBounded(s.path)
	if err != nil {
		return fmt.Errorf("agent tokens file: %w", err)
	}
	entries, err := Parse(s.path, data)
	if err != nil {
		return err
	}
	s.entries.Store(&entries)
	return nil
}

// readBounded reads at most MaxFileBytes + 1 bytes of path.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// Reload rereads the file. On an error the previous entries stay in
// effect, and the error is logged and returned.
func (s *Set) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		s.log.Error("agent tokens file: reread failed; the previous tokens stay in effect", "file", s.path, "err", err)
		return err
	}
	s.log.Info("agent tokens file reread", "file", s.path, "tokens", len(*s.entries.Load()))
	return nil
}

// changed reports whether the file's modification time or size differs
// from the last read's.
func (s *Set) changed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		return fileStamp{} != s.stamp // gone: one failing reread reports it
	}
	return fileStamp{fi.ModTime(), fi.Size()} != s.stamp
}

// Watch rereads the file whenever a value arrives on hup (SIGHUP) and,
// every poll (DefaultPollInterval when 0), when it has changed, until ctx
// ends.
func (s *Set) Watch(ctx context.Context, hup <-chan os.Signal, poll time.Duration) {
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = s.Reload()
		case <-tick.C:
			if s.changed() {
				_ = s.Reload()
			}
		}
	}
}

// Lookup returns the entry of token, comparing its SHA-256 with every
// entry's in constant time; nil when none matches.
func (s *Set) Lookup(token string) *Entry {
	if s == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	var found *Entry
	entries := *s.entries.Load()
	for i := range entries {
		if subtle.ConstantTimeCompare(sum[:], entries[i].sum[:]) == 1 {
			found = &entries[i]
		}
	}
	return found
}

// Collides returns the name of the entry whose hash is token's, for the
// check that no scoped token equals a token of another role; "" when none.
func (s *Set) Collides(token string) string {
	if e := s.Lookup(token); e != nil && token != "" {
		return e.Name
	}
	return ""
}
