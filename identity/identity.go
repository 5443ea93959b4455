// Package identity names who calls Vigil's operator API and what each may
// do (docs/security.md, "Identities and roles"): the roles viewer,
// operator and admin, each including the one before, and the users file
// (`vigil server` and `vigil lite` --users-file), a YAML list of named
// identities each with a role and the SHA-256 of its token:
//
//   - name: alice
//     role: operator
//     token_sha256: <64 hex digits: the SHA-256 of alice's token>
//
// The file holds hashes, not tokens: reading it gives no one a token. A
// Set rereads it on SIGHUP and when it changes (package hashfile); a
// reread that fails keeps the previous identities and logs why.
package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/vigil-sched/vigil/internal/hashfile"
)

// Role is what an identity may do. Each role includes the ones before it.
type Role string

// The roles, least first (docs/security.md has the route table).
const (
	// Viewer reads everything an operator may and changes nothing.
	Viewer Role = "viewer"
	// Operator also changes DAGs and runs: apply and delete DAGs,
	// trigger, cancel, clear, mark, pause, backfill.
	Operator Role = "operator"
	// Admin also changes the control plane: thresholds, reaps, the
	// fence, webhooks, secrets, pools, retention, and reads the audit log.
	Admin Role = "admin"
)

// Roles lists the roles, least first.
var Roles = []Role{Viewer, Operator, Admin}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("%q is not a role; one of viewer, operator, admin", s)
}

// Includes reports whether r may do what need may. The zero Role
// includes nothing.
func (r Role) Includes(need Role) bool {
	have, want := slices.Index(Roles, r), slices.Index(Roles, need)
	return have >= 0 && want >= 0 && have >= want
}

// Identity is a named caller of the operator API and its role.
type Identity struct {
	Name string
	Role Role
}

// The identities of the built-in tokens: --operator-token keeps every
// power it had before roles were split, so it is an admin.
var (
	OperatorToken = Identity{Name: "operator", Role: Admin}
	ViewerToken   = Identity{Name: "viewer", Role: Viewer}
)

// Reserved are names a users file may not take: the built-in tokens'
// identities, the agents', and what the audit log calls a caller that
// proved no identity.
var Reserved = []string{OperatorToken.Name, ViewerToken.Name, "agent", "anonymous"}

// what names the users file in errors and logs.
const what = "users file"

// Entry is one named identity of the users file.
type Entry struct {
	// Name names the identity in events and the audit log.
	Name string `yaml:"name"`
	// Role is one of viewer, operator, admin.
	Role Role `yaml:"role"`
	// TokenSHA256 is the hex SHA-256 of the identity's token, 64 digits.
	TokenSHA256 string `yaml:"token_sha256"`

	sum [sha256.Size]byte
}

// Identity is the entry's name and role.
func (e Entry) Identity() Identity { return Identity{Name: e.Name, Role: e.Role} }

// index is a parsed users file: entries by token hash and by name.
type index struct {
	bySum  map[[sha256.Size]byte]Entry
	byName map[string]Entry
}

// Parse reads the users file's content; path only names it in errors.
// Each error names the file, the entry (its position from 1, and its name
// when it has one) and the field, with the rule broken: names unique and
// not reserved, roles known, token hashes well-formed and unique.
func Parse(path string, data []byte) ([]Entry, error) {
	entries, err := hashfile.Decode[Entry](what, path, data, "{name, role, token_sha256}",
		"to name no identity, leave out --users-file")
	if err != nil {
		return nil, err
	}
	if err := hashfile.Check(what, path, entries, "one token is one identity"); err != nil {
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
	if slices.Contains(Reserved, e.Name) {
		return fmt.Errorf("name: %q is reserved (%v name the built-in tokens, agents and unauthenticated callers)", e.Name, Reserved)
	}
	if e.Role == "" {
		return fmt.Errorf("role: required: one of viewer, operator, admin")
	}
	if _, err := ParseRole(string(e.Role)); err != nil {
		return fmt.Errorf("role: %w", err)
	}
	var err error
	e.sum, err = hashfile.Sum(e.TokenSHA256)
	return err
}

func parseIndex(path string, data []byte) (index, error) {
	entries, err := Parse(path, data)
	if err != nil {
		return index{}, err
	}
	ix := index{bySum: make(map[[sha256.Size]byte]Entry, len(entries)), byName: make(map[string]Entry, len(entries))}
	for _, e := range entries {
		ix.bySum[e.sum], ix.byName[e.Name] = e, e
	}
	return ix, nil
}

// Set is the users file's identities in effect, safe for concurrent use.
// A nil *Set has no identities.
type Set struct {
	file *hashfile.File[index]
}

// Load reads path into a new Set. A file that cannot be read or parsed
// is an error: at start, a bad file stops the server.
func Load(path string, log *slog.Logger) (*Set, error) {
	f, err := hashfile.Load(what, path, log, parseIndex)
	if err != nil {
		return nil, err
	}
	return &Set{file: f}, nil
}

// Path is the file's path.
func (s *Set) Path() string { return s.file.Path() }

// Reload rereads the file. On an error the previous identities stay in
// effect, and the error is logged and returned.
func (s *Set) Reload() error { return s.file.Reload() }

// OnReload, set before Watch, is told the outcome of every reread.
func (s *Set) OnReload(fn func(error)) { s.file.OnReload = fn }

// Watch rereads the file whenever a value arrives on hup (SIGHUP) and,
// every poll (hashfile.DefaultPollInterval when 0), when it has changed,
// until ctx ends.
func (s *Set) Watch(ctx context.Context, hup <-chan os.Signal, poll time.Duration) {
	s.file.Watch(ctx, hup, poll)
}

// Lookup returns the entry whose token is token. It looks the token's
// SHA-256 up in a map rather than comparing tokens in constant time: the
// lookup's timing can tell at most how the presented token's hash relates
// to the stored hashes, and turning that into a token needs a SHA-256
// preimage, which no one can compute.
func (s *Set) Lookup(token string) (Entry, bool) {
	if s == nil || token == "" {
		return Entry{}, false
	}
	e, ok := s.file.Current().bySum[sha256.Sum256([]byte(token))]
	return e, ok
}

// ByName returns the entry named name, for a console session, which names
// its identity: the role is read from the file at every request, so a
// changed role or a removed entry takes effect on sessions at once.
func (s *Set) ByName(name string) (Entry, bool) {
	if s == nil {
		return Entry{}, false
	}
	e, ok := s.file.Current().byName[name]
	return e, ok
}

// Collides returns the name of the entry whose hash is token's, for the
// check that no identity's token is a built-in token; "" when none.
func (s *Set) Collides(token string) string {
	if e, ok := s.Lookup(token); ok {
		return e.Name
	}
	return ""
}

// SumHex is the hex SHA-256 of token, as a users file holds it.
func SumHex(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
