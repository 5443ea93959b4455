package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxKeyFile bounds what LoadKeyFile reads: a hex key with a newline and
// some whitespace.
const maxKeyFile = 4 << 10

// LoadKeyFile reads the secrets key from path: either 64 hexadecimal
// characters (surrounding whitespace ignored; what GenerateKeyFile writes
// and `openssl rand -hex 32` prints) or exactly 32 raw bytes that are not
// all hexadecimal digits (so a short hex key is refused, not taken raw). The file
// must be a regular file not readable or writable by group or others (as
// ssh refuses a private key). Errors name the file and what is wrong: it
// is missing, unreadable, too loose, or holds anything else (a short key
// is refused, never padded).
func LoadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("secrets key file %s: not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secrets key file %s: mode %04o lets group or others use it; chmod 600 it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	key, err := parseKey(b)
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return key, nil
}

// parseKey reads a key as LoadKeyFile documents.
func parseKey(b []byte) ([]byte, error) {
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("larger than %d bytes; it must hold %d random bytes, raw or as %d hexadecimal characters", maxKeyFile, KeyBytes, 2*KeyBytes)
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && isHex(t) {
		if len(t) != 2*KeyBytes {
			return nil, fmt.Errorf("holds %d hexadecimal characters; a hex key has %d (%d random bytes, e.g. from `openssl rand -hex 32`)", len(t), 2*KeyBytes, KeyBytes)
		}
		return hex.DecodeString(string(t))
	}
	if len(b) == KeyBytes {
		return b, nil
	}
	return nil, fmt.Errorf("holds %d bytes; it must hold %d random bytes, raw or as %d hexadecimal characters (e.g. from `openssl rand -hex 32`)", len(b), KeyBytes, 2*KeyBytes)
}

// isHex reports whether b is all hexadecimal digits. A raw key that is
// (a chance of about 1 in 10^34) is read as a short hex key and refused.
func isHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// GenerateKeyFile writes a new random key to path, in hex with a trailing
// newline, mode 0600, and returns it. It never overwrites: an existing
// file is an error (fs.ErrExist).
func GenerateKeyFile(path string) ([]byte, error) {
	key := make([]byte, KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return key, nil
}

// EnsureKeyFile loads the key at path, or generates it there when no file
// exists (Lite's data directory). Every other error is LoadKeyFile's.
func EnsureKeyFile(path string) ([]byte, error) {
	key, err := LoadKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return GenerateKeyFile(path)
	}
	return key, err
}
