// Package secrets holds the rules of Vigil's named secrets and seals their
// values: AES-256-GCM from the standard library, a fresh random nonce for
// every stored version, and the secret's name and version as additional
// data, so a sealed value copied onto another row or version does not open
// (docs/security.md "Secrets", adr/0030-secrets.md).
//
// The package knows nothing of the database or HTTP: the store keeps what
// Box.Seal returns, the API opens it for the one agent that claimed a task
// naming the secret.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Limits of a secret (docs/security.md "Secrets").
const (
	// MaxNameLen is the longest secret name, in bytes.
	MaxNameLen = 128
	// MaxValueBytes is the largest value: 64 KiB, far above any password,
	// token or key file, and small enough to travel in a claim reply.
	MaxValueBytes = 64 << 10
	// MinValueBytes is the shortest value. The agent replaces every
	// delivered value in the task's log lines with "***"; a value of one
	// to three bytes would shred every log line it appears in.
	MinValueBytes = 4
	// MaxSecrets bounds how many secrets one cluster holds, which keeps
	// `secrets list` a bounded reply without paging.
	MaxSecrets = 1000
	// KeyBytes is the size of the key: AES-256.
	KeyBytes = 32
)

// NameRule is the rule a secret name follows, as error messages quote it.
const NameRule = "1 to 128 characters of [A-Za-z0-9_], not starting with a digit (^[A-Za-z_][A-Za-z0-9_]{0,127}$)"

// ValidName reports whether name follows NameRule. The shape is an
// environment variable name's: safe in URLs, logs and shells unquoted.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckValue returns why value may not be stored as a secret, or nil: its
// length must be in MinValueBytes..MaxValueBytes, and it must be UTF-8
// text without NUL bytes, what a task's environment and the JSON of the
// API carry intact (a binary key travels base64-encoded).
func CheckValue(value []byte) error {
	switch {
	case !utf8.Valid(value):
		return errors.New("must be UTF-8 text (encode a binary value, e.g. with base64)")
	case len(value) < MinValueBytes:
		return fmt.Errorf("must be at least %d bytes (got %d): the agent masks every delivered value in task logs, and a shorter one would shred them", MinValueBytes, len(value))
	case len(value) > MaxValueBytes:
		return fmt.Errorf("must be at most %d bytes (64 KiB; got %d)", MaxValueBytes, len(value))
	}
	for _, b := range value {
		if b == 0 {
			return errors.New("must not contain NUL bytes: a task's environment cannot carry them")
		}
	}
	return nil
}

// Box seals and opens secret values with one key. It is safe for
// concurrent use.
type Box struct {
	aead cipher.AEAD
}

// NewBox returns a Box for a KeyBytes-long key.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("secrets key: must be %d bytes (got %d)", KeyBytes, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// ErrWrongKey is what Open returns when a sealed value does not open: a
// different key sealed it, or it was moved to another name or version, or
// altered.
var ErrWrongKey = errors.New("does not open with this key (a different key sealed it, or the stored row was altered)")

// additional is the additional data bound to a sealed value: the secret's
// name and version, so a row copied onto another name or version fails
// to open.
func additional(name string, version int64) []byte {
	return []byte("vigil-secret\x00" + name + "\x00" + strconv.FormatInt(version, 10))
}

// Seal encrypts value for the given name and version: a random 12-byte
// nonce followed by the ciphertext and its tag.
func (b *Box) Seal(name string, version int64, value []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(value)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	return b.aead.Seal(nonce, nonce, value, additional(name, version)), nil
}

// Open decrypts what Seal returned for the same name and version.
// Errors: ErrWrongKey.
func (b *Box) Open(name string, version int64, sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, ErrWrongKey
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], additional(name, version))
	if err != nil {
		return nil, ErrWrongKey
	}
	return out, nil
}

// verifierName and verifierText make the key check: a known text sealed
// under a name no secret can have (ValidName refuses '-'), so the first
// start with a key stores it and every later start proves it holds the
// same key before it serves a secret.
const (
	verifierName = "-key-check-"
	verifierText = "vigil secrets key check"
)

// Verifier returns a fresh sealed key check for this key.
func (b *Box) Verifier() ([]byte, error) {
	return b.Seal(verifierName, 1, []byte(verifierText))
}

// CheckVerifier reports whether sealed is a key check this Box's key made.
// Errors: ErrWrongKey.
func (b *Box) CheckVerifier(sealed []byte) error {
	v, err := b.Open(verifierName, 1, sealed)
	if err != nil {
		return err
	}
	if string(v) != verifierText {
		return ErrWrongKey
	}
	return nil
}
