// Package hashfile reads the YAML files that name tokens by their hash
// (--agent-tokens-file, --users-file) and keeps them in effect while the
// server runs: a File rereads its file on demand (SIGHUP) and when its
// modification time or size changes (Watch polls them every 2 s); a
// reread that fails keeps the previous good content and logs why.
//
// Polling, not a file-watching library: the files are tiny and change
// rarely, a poll of two stat calls a second costs nothing, and it sees
// the usual atomic replacement (write a new file, rename it over the
// old), which inotify watches of the old inode miss. A change is in
// effect within one poll interval.
//
// The files hold hashes, never tokens, so reading one gives no one a
// token. Replace a file atomically: a reread may otherwise see it
// half-written (an empty file is refused for that reason).
package hashfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Bounds of a file, so that a mistaken path (a log, a binary) fails fast
// and clearly rather than being parsed at length.
const (
	// MaxFileBytes bounds a file's size.
	MaxFileBytes = 1 << 20
	// MaxEntries bounds its entries.
	MaxEntries = 1000
	// MaxNameBytes bounds an entry's name.
	MaxNameBytes = 128
)

// DefaultPollInterval is how often Watch checks the file for a change.
const DefaultPollInterval = 2 * time.Second

// Decode reads data, the content of the file path, as a YAML list of E
// with no unknown field. what names the kind of file in errors ("users
// file"), shape the fields an entry has, and empty what to do instead of
// an empty file, which is refused as a half-written one would be.
func Decode[E any](what, path string, data []byte, shape, empty string) ([]E, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s %s: %d bytes, more than %d", what, path, len(data), MaxFileBytes)
	}
	var entries []E
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s %s: %v (want a YAML list of %s)", what, path, err, shape)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s %s: no entries; an empty file is refused, as a half-written one would be (%s)", what, path, empty)
	}
	if len(entries) > MaxEntries {
		return nil, fmt.Errorf("%s %s: %d entries, more than %d", what, path, len(entries), MaxEntries)
	}
	return entries, nil
}

// Entry is what Check needs of a parsed entry (a pointer to it).
type Entry interface {
	// Check validates the entry's fields and computes its hash; its error
	// names the field and the rule.
	Check() error
	// Key is the entry's name and token hash, after Check.
	Key() (string, [sha256.Size]byte)
}

// Check validates every entry and that names and token hashes are
// unique; each error names the file, the entry and the field. sameHash
// says why one hash may not stand twice.
func Check[E any, P interface {
	*E
	Entry
}](what, path string, entries []E, sameHash string) error {
	names, sums := map[string]int{}, map[[sha256.Size]byte]int{}
	for i := range entries {
		e := P(&entries[i])
		err := e.Check()
		name, sum := e.Key()
		where := Where(what, path, i, name)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if j, dup := names[name]; dup {
			return fmt.Errorf("%s: name: also the name of entry %d; names must be unique", where, j)
		}
		if j, dup := sums[sum]; dup {
			return fmt.Errorf("%s: token_sha256: also the hash of entry %d; %s", where, j, sameHash)
		}
		names[name], sums[sum] = i+1, i+1
	}
	return nil
}

// Where names entry i (from 0) of a file in an error: the file, the
// entry's position from 1 and its name when it has one.
func Where(what, path string, i int, name string) string {
	s := fmt.Sprintf("%s %s: entry %d", what, path, i+1)
	if name != "" {
		s += fmt.Sprintf(" (%q)", name)
	}
	return s
}

// CheckName validates an entry's name field: required, at most
// MaxNameBytes of printable UTF-8.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("name: required")
	case len(name) > MaxNameBytes || !utf8.ValidString(name) || strings.ContainsFunc(name, IsControl):
		return fmt.Errorf("name: must be at most %d bytes of printable UTF-8", MaxNameBytes)
	}
	return nil
}

// Sum parses a token_sha256 field: 64 hex digits, the SHA-256 of a token
// (`printf %s "$TOKEN" | sha256sum`).
func Sum(field string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	raw, err := hex.DecodeString(field)
	if err != nil || len(raw) != sha256.Size {
		return sum, fmt.Errorf("token_sha256: must be %d hex digits, the SHA-256 of the token (sha256sum), got %d characters",
			2*sha256.Size, len(field))
	}
	copy(sum[:], raw)
	return sum, nil
}

// IsControl reports an ASCII control character, which no name or tag may
// hold (it would garble a log line or a terminal).
func IsControl(r rune) bool { return r < 0x20 || r == 0x7f }

// File is the parsed content of one file, kept in effect and safe for
// concurrent use.
type File[T any] struct {
	what  string
	path  string
	log   *slog.Logger
	parse func(path string, data []byte) (T, error)
	// OnReload, when set before Watch, is told the outcome of every
	// reread (nil: it succeeded), e.g. to count failures in a metric.
	OnReload func(err error)

	current atomic.Pointer[T]
	mu      sync.Mutex // serializes rereads
	stamp   fileStamp  // of the last read, good or bad; guarded by mu
}

// fileStamp is what Watch compares to notice a change.
type fileStamp struct {
	mod  time.Time
	size int64
}

// Load reads path with parse into a new File. what names the kind of
// file in errors and logs. A file that cannot be read or parsed is an
// error: at start, a bad file stops the server.
func Load[T any](what, path string, log *slog.Logger, parse func(path string, data []byte) (T, error)) (*File[T], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File[T]{what: what, path: path, log: log, parse: parse}
	if err := f.read(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is the file's path.
func (f *File[T]) Path() string { return f.path }

// Current is the content in effect: the last good read.
func (f *File[T]) Current() T { return *f.current.Load() }

// read parses the file and, when it is good, puts it in effect.
func (f *File[T]) read() error {
	fi, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	f.stamp = fileStamp{fi.ModTime(), fi.Size()}
	data, err := readBounded(f.path)
	if err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	v, err := f.parse(f.path, data)
	if err != nil {
		return err
	}
	f.current.Store(&v)
	return nil
}

// readBounded reads at most MaxFileBytes + 1 bytes of path.
func readBounded(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
}

// Reload rereads the file. On an error the previous content stays in
// effect, and the error is logged and returned.
func (f *File[T]) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.read()
	if err != nil {
		f.log.Error(f.what+": reread failed; the previous content stays in effect", "file", f.path, "err", err)
	} else {
		f.log.Info(f.what+" reread", "file", f.path)
	}
	if f.OnReload != nil {
		f.OnReload(err)
	}
	return err
}

// Changed reports whether the file's modification time or size differs
// from the last read's.
func (f *File[T]) Changed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return fileStamp{} != f.stamp // gone: one failing reread reports it
	}
	return fileStamp{fi.ModTime(), fi.Size()} != f.stamp
}

// Watch rereads the file whenever a value arrives on hup (SIGHUP) and,
// every poll (DefaultPollInterval when 0), when it has changed, until ctx
// ends.
func (f *File[T]) Watch(ctx context.Context, hup <-chan os.Signal, poll time.Duration) {
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
			_ = f.Reload()
		case <-tick.C:
			if f.Changed() {
				_ = f.Reload()
			}
		}
	}
}
