package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// hbaConf is the pg_hba.conf of a cluster with a PasswordFile: every
// connection, over the unix socket or TCP from 127.0.0.1 (the only
// address it listens on), must prove the password with SCRAM-SHA-256.
// No peer, ident or trust line: a process of any OS user, root included,
// needs the password.
const hbaConf = `# Written by Vigil (store/pgcluster); edits are overwritten.
# Every connection needs the password of Vigil's password file.
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
`

// passwordBytes is the random part of a generated password, hex-encoded
// in the file (64 characters, safe inside an SQL string literal).
const passwordBytes = 32

// ensureAuth makes the cluster require Config.PasswordFile's password. A
// new file gets a generated password (mode 0600, owned by this process's
// user, who alone reads it). When the file is new, or pg_hba.conf is not
// Vigil's (a cluster initdb made with --auth=trust, or one an older Vigil
// made), it sets the superuser's password in single-user mode, the server
// not running, then writes pg_hba.conf: at no moment does the server
// accept a connection without the password. A failure between the two
// steps leaves the old pg_hba.conf, and the next Start does both again.
func (c *Cluster) ensureAuth(ctx context.Context) error {
	pw, fresh, err := readOrCreatePassword(c.cfg.PasswordFile)
	if err != nil {
		return err
	}
	c.password = pw
	hba := filepath.Join(c.dir, "pg_hba.conf")
	cur, err := os.ReadFile(hba)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	ours := bytes.Equal(cur, []byte(hbaConf))
	if ours && !fresh {
		return nil
	}
	if !ours && hasTrust(cur) {
		c.log.Info("requiring a password on a cluster that trusted local connections", "password_file", c.cfg.PasswordFile)
	}
	if err := c.setPassword(ctx, pw); err != nil {
		return err
	}
	return c.run.writeOwned(hba, []byte(hbaConf))
}

// hasTrust reports whether a pg_hba.conf has an uncommented trust line.
func hasTrust(conf []byte) bool {
	for _, line := range strings.Split(string(conf), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && !strings.HasPrefix(f[0], "#") && f[len(f)-1] == "trust" {
			return true
		}
	}
	return false
}

// setPassword sets User's password with `postgres --single`, which needs
// no connection and so no authentication. The password travels on stdin
// only; errors and their output never show it.
func (c *Cluster) setPassword(ctx context.Context, pw string) error {
	stmt := fmt.Sprintf("ALTER ROLE %s PASSWORD '%s';\n", User, pw)
	out, err := c.run.runIn(ctx, stmt, c.bin.postgres, "--single", "-D", c.dir,
		"-c", "password_encryption=scram-sha-256", "-c", "exit_on_error=on",
		"-c", "log_min_error_statement=panic", "-c", "log_statement=none", "postgres")
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), pw, "***")
		return fmt.Errorf("pgcluster: set the password of %s in single-user mode: %s", User, msg)
	}
	if strings.Contains(out, "ERROR:") || strings.Contains(out, "FATAL:") {
		return fmt.Errorf("pgcluster: set the password of %s in single-user mode: %s", User, strings.ReplaceAll(out, pw, "***"))
	}
	return nil
}

// readOrCreatePassword returns the password in path, or writes a new one
// there (mode 0600, created exclusively) and reports it fresh. A file that
// group or others may read is refused, as ssh refuses such keys.
func readOrCreatePassword(path string) (pw string, fresh bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		fi, err := os.Stat(path)
		if err != nil {
			return "", false, fmt.Errorf("pgcluster: password file: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return "", false, fmt.Errorf("pgcluster: password file %s has mode %04o: group and others must not read it (chmod 600 %s)", path, perm, path)
		}
		pw = strings.TrimSpace(string(b))
		if pw == "" || strings.ContainsAny(pw, "'\\\n") {
			return "", false, fmt.Errorf("pgcluster: password file %s: must hold one line, the password, without ' or \\", path)
		}
		return pw, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("pgcluster: password file: %w", err)
	}
	raw := make([]byte, passwordBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", false, fmt.Errorf("pgcluster: generate a password: %w", err)
	}
	pw = hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("pgcluster: password file: %w", err)
	}
	_, err = f.WriteString(pw + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", false, fmt.Errorf("pgcluster: password file: %w", err)
	}
	return pw, true, nil
}
