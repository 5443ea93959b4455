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
// time or size changes (package hashfile); a reread that fails keeps the
// previous good entries and logs why.
package agenttoken

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigil-sched/vigil/internal/hashfile"
)

// Bounds of the file (besides hashfile's size and entry bounds).
const (
	// MaxTags and MaxTagBytes bound one entry's tags, as an agent's own
	// tags are bounded.
	MaxTags     = 64
	MaxTagBytes = 64
)

// what names the file in errors and logs.
const what = "agent tokens file"

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
	entries, err := hashfile.Decode[Entry](what, path, data, "{name, token_sha256, tags}",
		"to drop every scoped token, leave out --agent-tokens-file")
	if err != nil {
		return nil, err
	}
	if err := hashfile.Check(what, path, entries, "one token has one list of tags"); err != nil {
		return nil, err
	}
	return entries, nil
}

// Key is the entry's name and token hash (hashfile.Entry).
func (e *Entry) Key() (string, [sha256.Size]byte) { return e.Name, e.sum }

// Check validates the entry and fills its hash (hashfile.Entry).
func (e *Entry) Check() error {
	if err := hashfile.CheckName(e.Name); err != nil {
		return err
	}
	var err error
	if e.sum, err = hashfile.Sum(e.TokenSHA256); err != nil {
		return err
	}
	switch {
	case len(e.Tags) == 0:
		return errors.New("tags: required: the list of tags this token may register (the plain --agent-token serves all tags)")
	case len(e.Tags) > MaxTags:
		return fmt.Errorf("tags: at most %d, got %d", MaxTags, len(e.Tags))
	}
	for j, t := range e.Tags {
		if t == "" || len(t) > MaxTagBytes || !utf8.ValidString(t) || strings.ContainsFunc(t, hashfile.IsControl) {
			return fmt.Errorf("tags[%d]: %q must be 1 to %d bytes of printable UTF-8", j, t, MaxTagBytes)
		}
	}
	return nil
}

// Set is the scoped tokens in effect, safe for concurrent use.
type Set struct {
	file *hashfile.File[[]Entry]
}

// Load reads path into a new Set. A file that cannot be read or parsed
// is an error: at start, a bad file stops the server.
func Load(path string, log *slog.Logger) (*Set, error) {
	f, err := hashfile.Load(what, path, log, Parse)
	if err != nil {
		return nil, err
	}
	return &Set{file: f}, nil
}

// Path is the file's path.
func (s *Set) Path() string { return s.file.Path() }

// Reload rereads the file. On an error the previous entries stay in
// effect, and the error is logged and returned.
func (s *Set) Reload() error { return s.file.Reload() }

// changed reports whether the file's modification time or size differs
// from the last read's.
func (s *Set) changed() bool { return s.file.Changed() }

// Watch rereads the file whenever a value arrives on hup (SIGHUP) and,
// every poll (hashfile.DefaultPollInterval when 0), when it has changed,
// until ctx ends.
func (s *Set) Watch(ctx context.Context, hup <-chan os.Signal, poll time.Duration) {
	s.file.Watch(ctx, hup, poll)
}

// Lookup returns the entry of token, comparing its SHA-256 with every
// entry's in constant time; nil when none matches.
func (s *Set) Lookup(token string) *Entry {
	if s == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	var found *Entry
	entries := s.file.Current()
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
