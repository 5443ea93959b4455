package main

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/pflag"
)

// Secrets out of the process list and the environment: every
// flag that takes a secret (--token, --agent-token, --operator-token,
// --etcd-password) has a --<flag>-file twin that names a file holding it.
// A value given on the command line shows in ps, and one given as
// VIGIL_<FLAG> is inherited by every child; a file readable only by the
// service user is neither. docs/configuration.md recommends the files.

// maxSecretFile bounds what a secret file may hold.
const maxSecretFile = 64 << 10

// secretFile is the --<flag>-file twin of a secret flag.
type secretFile struct {
	flag     string  // the secret flag's name, e.g. "agent-token"
	value    *string // the secret flag's variable
	path     string  // --<flag>-file
	resolved bool
}

// addSecretFile adds --<flag>-file to f beside the secret flag whose
// variable is value; resolve reads the file into it.
func addSecretFile(f *pflag.FlagSet, flag string, value *string) *secretFile {
	s := &secretFile{flag: flag, value: value}
	f.StringVar(&s.path, flag+"-file", "", "file holding the --"+flag+" value (one line; keeps it out of the process list and the environment)")
	return s
}

// resolve fills the secret from its file, once. The file holds one line:
// surrounding whitespace and the trailing newline are dropped, and the
// secret may contain no whitespace or control character. Errors (usage,
// exit 2) name the flag and the file: both forms given, an unreadable,
// empty, oversized or multi-line file.
func (s *secretFile) resolve() error {
	if s.path == "" || s.resolved {
		return nil
	}
	flag := "--" + s.flag + "-file"
	if *s.value != "" {
		return usageError("--%s and %s: give one or the other, not both", s.flag, flag)
	}
	info, err := os.Stat(s.path)
	if err != nil {
		return usageError("%s %s: %v", flag, s.path, pathErr(err))
	}
	if info.IsDir() {
		return usageError("%s %s: is a directory, not a file", flag, s.path)
	}
	if info.Size() > maxSecretFile {
		return usageError("%s %s: %d bytes, more than the %d a secret may have", flag, s.path, info.Size(), maxSecretFile)
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return usageError("%s %s: %v", flag, s.path, pathErr(err))
	}
	v := strings.TrimSpace(string(b))
	switch {
	case v == "":
		return usageError("%s %s: the file is empty; it must hold the --%s value", flag, s.path, s.flag)
	case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return usageError("%s %s: the secret must be one line without spaces or control characters", flag, s.path)
	}
	*s.value, s.resolved = v, true
	return nil
}

// resolveSecrets resolves each file flag; the first error wins.
func resolveSecrets(list ...*secretFile) error {
	for _, s := range list {
		if err := s.resolve(); err != nil {
			return err
		}
	}
	return nil
}

// pathErr drops the path an *fs.PathError repeats ("open /x: ..."), since
// the caller's message already names the file.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
