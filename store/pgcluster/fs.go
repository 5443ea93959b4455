package pgcluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// prepareDir creates dir (0700) and its parents (0755) if missing and makes
// it usable by the server: PostgreSQL wants its data directory owned by the
// server user with mode 0700 or 0750. As root, dir is chowned to the server
// user (recursively if it already holds a cluster owned by someone else) and
// every ancestor is made traversable by it.
func (r *runner) prepareDir(dir string, log *slog.Logger) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("pgcluster: create parent of data directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pgcluster: create data directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("pgcluster: data directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("pgcluster: data directory %s is not a directory", dir)
	}
	if r.asRoot() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != r.uid {
			if hasCluster(dir) {
				log.Info("chowning existing PostgreSQL data directory to the server user",
					"dir", dir, "user", serverUser, "previous_uid", st.Uid)
				if err := r.chownR(dir); err != nil {
					return err
				}
			} else if err := os.Chown(dir, r.uid, r.gid); err != nil {
				return fmt.Errorf("pgcluster: chown data directory to %s: %w", serverUser, err)
			}
		}
		if err := r.makeTraversable(parent, log); err != nil {
			return err
		}
	}
	if perm := fi.Mode().Perm(); perm != 0o700 && perm != 0o750 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("pgcluster: data directory %s has mode %o; PostgreSQL needs 0700: %w", dir, perm, err)
		}
	}
	return nil
}

// hasCluster reports whether dir holds an initialised cluster.
func hasCluster(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "PG_VERSION"))
	return err == nil
}

func (r *runner) chownR(dir string) error {
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, r.uid, r.gid)
	})
	if err != nil {
		return fmt.Errorf("pgcluster: chown data directory to %s: %w", serverUser, err)
	}
	return nil
}

// makeTraversable adds o+x to every ancestor from dir up to / that the server
// user could not otherwise enter (it neither owns it with u+x, nor is it of
// the server's group with g+x, as PrivateParent makes it, nor has o+x).
func (r *runner) makeTraversable(dir string, log *slog.Logger) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("pgcluster: resolve %s: %w", dir, err)
	}
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgcluster: make %s traversable: %w", p, err)
		}
		mode := fi.Mode().Perm()
		owned, group := false, false
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owned, group = int(st.Uid) == r.uid, int(st.Gid) == r.gid
		}
		if mode&0o001 == 0 && !(owned && mode&0o100 != 0) && !(group && mode&0o010 != 0) {
			if err := os.Chmod(p, mode|0o001); err != nil {
				return fmt.Errorf("pgcluster: make %s traversable by %s: %w", p, serverUser, err)
			}
			log.Info("made directory traversable by the PostgreSQL server user", "dir", p, "user", serverUser)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// mkdirOwned creates dir (0700) if missing and, as root, gives it to the
// server user.
func (r *runner) mkdirOwned(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if r.asRoot() {
		if err := os.Chown(dir, r.uid, r.gid); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// writeOwned writes a file (0600) readable by the server.
func (r *runner) writeOwned(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if r.asRoot() {
		if err := os.Chown(path, r.uid, r.gid); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// rotateLog renames path to path.1 when it exceeds maxLogBytes; pg_ctl -l
// only ever appends.
func rotateLog(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogBytes {
		_ = os.Rename(path, path+".1")
	}
}

// fileSize returns the size of path, or 0.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns at most the last max bytes of path written after offset.
func readFrom(path string, offset, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-offset > max {
		offset = size - max
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return string(b)
}

// PrivateParent creates dir (and its parents, 0755) if missing and makes
// it private to the calling user: mode 0700, or, when cluster is set and
// the caller is root, and so runs the server as the postgres user, owner
// root, group postgres and mode 0710, so that the server can pass through dir to a
// cluster below it while it can list nothing and open none of the
// caller's files there (each 0600), and other users cannot enter at all.
// An existing dir with a wider mode is narrowed, and the change logged.
// vigil lite calls it on its data directory, which holds its tokens, the
// cluster's password file and the cluster.
func PrivateParent(dir string, cluster bool, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create %s: %w", dir, err)
	}
	mode, gid := os.FileMode(0o700), -1
	if cluster && os.Geteuid() == 0 {
		r, err := newRunner()
		if err != nil {
			return err
		}
		mode, gid = 0o710, r.gid
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if gid >= 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Gid) != gid || int(st.Uid) != 0 {
			if err := os.Chown(dir, 0, gid); err != nil {
				return fmt.Errorf("pgcluster: give %s to root and the group of %s: %w", dir, serverUser, err)
			}
		}
	}
	if fi.Mode().Perm() != mode {
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("pgcluster: make %s private (mode %04o): %w", dir, mode, err)
		}
		if log != nil {
			log.Info("made the data directory private", "dir", dir, "was", fmt.Sprintf("%04o", fi.Mode().Perm()), "now", fmt.Sprintf("%04o", mode))
		}
	}
	return nil
}
