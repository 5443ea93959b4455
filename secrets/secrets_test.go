package secrets

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func box(t *testing.T, fill byte) *Box {
	t.Helper()
	b, err := NewBox(bytes.Repeat([]byte{fill}, KeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSealOpensOnlyForItsNameVersionAndKey(t *testing.T) {
	b := box(t, 1)
	sealed, err := b.Seal("db_password", 3, []byte("hunter22"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter22")) {
		t.Fatal("the sealed value holds the plaintext")
	}
	got, err := b.Open("db_password", 3, sealed)
	if err != nil || string(got) != "hunter22" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"other name":    func() ([]byte, error) { return b.Open("db_passwore", 3, sealed) },
		"other version": func() ([]byte, error) { return b.Open("db_password", 2, sealed) },
		"other key":     func() ([]byte, error) { return box(t, 2).Open("db_password", 3, sealed) },
		"truncated":     func() ([]byte, error) { return b.Open("db_password", 3, sealed[:10]) },
	} {
		if _, err := open(); !errors.Is(err, ErrWrongKey) {
			t.Errorf("%s: Open err = %v, want ErrWrongKey", name, err)
		}
	}
	again, _ := b.Seal("db_password", 3, []byte("hunter22"))
	if bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
}

func TestVerifier(t *testing.T) {
	v, err := box(t, 1).Verifier()
	if err != nil {
		t.Fatal(err)
	}
	if err := box(t, 1).CheckVerifier(v); err != nil {
		t.Errorf("same key: %v", err)
	}
	if err := box(t, 2).CheckVerifier(v); !errors.Is(err, ErrWrongKey) {
		t.Errorf("other key: %v, want ErrWrongKey", err)
	}
	if ValidName(verifierName) {
		t.Error("the verifier's name is a valid secret name: a secret could collide with it")
	}
}

func TestNamesAndValues(t *testing.T) {
	for _, ok := range []string{"a", "_", "DB_PASSWORD", "db_password2", strings.Repeat("x", MaxNameLen)} {
		if !ValidName(ok) {
			t.Errorf("ValidName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "2fa", "db-password", "a.b", "a b", "é", strings.Repeat("x", MaxNameLen+1)} {
		if ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
	for _, ok := range [][]byte{[]byte("abcd"), bytes.Repeat([]byte("x"), MaxValueBytes), []byte("pässwörd")} {
		if err := CheckValue(ok); err != nil {
			t.Errorf("CheckValue(%d bytes) = %v", len(ok), err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("abc"), bytes.Repeat([]byte("x"), MaxValueBytes+1), []byte("ab\x00cd"), {0xff, 0xfe, 1, 2}} {
		if err := CheckValue(bad); err == nil {
			t.Errorf("CheckValue(%q) = nil", bad)
		}
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, content []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	raw := bytes.Repeat([]byte{7}, KeyBytes)
	for name, path := range map[string]string{
		"hex": write("hex", []byte("  "+hex.EncodeToString(raw)+"\n"), 0o600),
		"raw": write("raw", raw, 0o400),
	} {
		key, err := LoadKeyFile(path)
		if err != nil || !bytes.Equal(key, raw) {
			t.Errorf("%s: LoadKeyFile = %x, %v", name, key, err)
		}
	}
	for name, c := range map[string]struct {
		path string
		want string
	}{
		"short":   {write("short", []byte(hex.EncodeToString(raw[:16])), 0o600), "holds 32 hexadecimal characters"},
		"empty":   {write("empty", nil, 0o600), "holds 0 bytes"},
		"not hex": {write("nothex", []byte(strings.Repeat("zz", KeyBytes)), 0o600), "holds 64 bytes"},
		"loose":   {write("loose", []byte(hex.EncodeToString(raw)), 0o644), "mode 0644"},
		"missing": {filepath.Join(dir, "missing"), "no such file"},
		"dir":     {dir, "not a regular file"},
	} {
		_, err := LoadKeyFile(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: LoadKeyFile err = %v, want one naming %s and %q", name, err, c.path, c.want)
		}
	}

	gen := filepath.Join(dir, "gen.key")
	k1, err := EnsureKeyFile(gen)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(gen)
	if info.Mode().Perm() != 0o600 {
		t.Errorf("generated key mode %04o, want 0600", info.Mode().Perm())
	}
	k2, err := EnsureKeyFile(gen)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("second EnsureKeyFile = %x, %v; want the generated key %x", k2, err, k1)
	}
	if _, err := GenerateKeyFile(gen); !errors.Is(err, fs.ErrExist) {
		t.Errorf("GenerateKeyFile over a key: %v, want ErrExist", err)
	}
}
