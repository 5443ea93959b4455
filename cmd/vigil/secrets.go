package main

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
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

// MinTokenLen is the fewest characters a token Vigil is given may have
// (--agent-token, --operator-token, --viewer-token and their files): a
// shorter one could be guessed by a sign-in throttled per address from
// many addresses (docs/security.md). Lite's generated tokens have 48.
const MinTokenLen = 16

// secretFile is the --<flag>-file twin of a secret flag.
type secretFile struct {
	flag     string  // the secret flag's name, e.g. "agent-token"
	value    *string // the secret flag's variable
	path     string  // --<flag>-file
	minLen   int     // the fewest characters the secret may have; 0: any
	resolved bool
}

// addTokenFile is addSecretFile for a token of the server's, which must
// have at least MinTokenLen characters whichever way it is given.
func addTokenFile(f *pflag.FlagSet, flag string, value *string) *secretFile {
	s := addSecretFile(f, flag, value)
	s.minLen = MinTokenLen
	return s
}

// checkSecretMode refuses a secret file that group or others may read or
// write, as ssh refuses such a key: anyone else on the host could take the
// secret. One layout is allowed, Kubernetes' fsGroup: a file owned by
// another user, whose group is one of ours and may only read it (0440 or
// 0040), is readable by this process through that group alone.
func checkSecretMode(flag, path string, info fs.FileInfo) error {
	perm := info.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && perm&0o037 == 0 && int(st.Uid) != os.Geteuid() && inGroup(int(st.Gid)) {
		return nil
	}
	return usageError("%s %s: mode %04o lets group or others reach the secret; run chmod 600 %s (as ssh refuses such keys)", flag, path, perm, path)
}

// inGroup reports whether gid is this process's group or one of its
// supplementary groups.
func inGroup(gid int) bool {
	if gid == os.Getegid() {
		return true
	}
	groups, _ := os.Getgroups()
	return slices.Contains(groups, gid)
}

// checkLen refuses a secret shorter than s.minLen, naming the file it came
// from or the flag.
func (s *secretFile) checkLen() error {
	v := *s.value
	if s.minLen == 0 || v == "" || len([]rune(v)) >= s.minLen {
		return nil
	}
	from := "--" + s.flag
	if s.resolved {
		from = "--" + s.flag + "-file " + s.path
	}
	return usageError("%s: the token has %d characters, fewer than the %d a token must have (generate one: openssl rand -hex 24)",
		from, len([]rune(v)), s.minLen)
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
// empty, oversized or multi-line file, one group or others may read
// (checkSecretMode), a token shorter than its minimum (also when given by
// the flag itself).
func (s *secretFile) resolve() error {
	if s.path == "" || s.resolved {
		return s.checkLen()
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
	if err := checkSecretMode(flag, s.path, info); err != nil {
		return err
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
	return s.checkLen()
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
