package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/outputs"
	"github.com/vigil-sched/vigil/state"
)

// Task outputs on the agent (docs/task-environment.md, "Outputs"): each
// attempt gets its own file, VIGIL_OUTPUT, that only its task user may
// write (outputFile); after a success the agent parses it (package
// outputs) and sends the outputs with the completion.

// outputFile names the VIGIL_OUTPUT file of one attempt in the agent's
// task directory (mode 0711: a task cannot list it, so it reaches no
// other attempt's file), under a name of 128 random bits that no other
// task can guess. For a task user u, the file is created, empty, mode
// 0600 and owned by u: u cannot create files in the agent's directory,
// nor replace its own file with a link. A task that runs as the agent's
// own user creates the file itself when it first appends, as the
// directory's owner, and most tasks never do: an inode created and
// removed per attempt cost up to 11 % of the machine in Lite's no-op
// burn-down on an ext4 without journal, whose inode allocator scans past
// every recently deleted inode (docs/performance.md). readOutputFile
// takes a missing file as no outputs. The caller removes the file, if
// any, when the attempt ends.
func (a *Agent) outputFile(u *taskUser) (string, error) {
	a.workMu.Lock()
	defer a.workMu.Unlock()
	base, err := a.workBaseLocked()
	if err != nil {
		return "", err
	}
	var name [16]byte
	if _, err := rand.Read(name[:]); err != nil {
		return "", fmt.Errorf("VIGIL_OUTPUT file: %w", err)
	}
	path := filepath.Join(base, "output-"+hex.EncodeToString(name[:]))
	if u == nil {
		return path, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("VIGIL_OUTPUT file: %w", err)
	}
	// Chowned through the descriptor just created, never by path.
	if err := errors.Join(f.Chown(u.uid, u.gid), f.Close()); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("VIGIL_OUTPUT file for user %s: %w", u.name, err)
	}
	return path, nil
}

// readOutputFile reads the VIGIL_OUTPUT file at path, at most
// outputs.MaxFileBytes (a larger file is an *outputs.TooLargeError). It
// opens the file itself, never a link, and only a regular file. A file
// that does not exist holds no outputs (nil, nil): a task that runs as
// the agent's user creates it only to write one (outputFile).
func readOutputFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the VIGIL_OUTPUT file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read the VIGIL_OUTPUT file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the VIGIL_OUTPUT file is no longer a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > outputs.MaxFileBytes {
		return nil, &outputs.TooLargeError{Bytes: int(fi.Size()), File: true}
	}
	data, err := io.ReadAll(io.LimitReader(f, outputs.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the VIGIL_OUTPUT file: %w", err)
	}
	if len(data) > outputs.MaxFileBytes { // it grew since the Stat
		return nil, &outputs.TooLargeError{Bytes: len(data), File: true}
	}
	return data, nil
}

// collectOutputs reads att's VIGIL_OUTPUT file into req, a success. A
// file over the limits fails the try output_too_large, a file that is not
// in the format output_invalid, each with the error as its message (the
// exit code stays 0). An output whose key or value contains a value of a
// secret the task received is not sent: the agent drops it and says so in
// the task's log, without the value, as GitHub Actions skips such an
// output (docs/security.md, "Secrets").
func (a *Agent) collectOutputs(att *attempt, path string, req *protocol.CompleteRequest) {
	data, err := readOutputFile(path)
	var out map[string]string
	if err == nil {
		out, err = outputs.Parse(data)
	}
	if err != nil {
		req.Outcome, req.Failure, req.Error = state.OutcomeFailed, state.FailureOutputInvalid, err.Error()
		var tooLarge *outputs.TooLargeError
		if errors.As(err, &tooLarge) {
			req.Failure = state.FailureOutputTooLarge
		}
		att.log.Info("outputs refused", "failure", req.Failure, "err", err)
		a.systemLine(att, fmt.Sprintf("--- outputs refused (%s): %v ---", req.Failure, err))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(out)) {
		if holdsSecret(att.task.Secrets, k, out[k]) {
			delete(out, k)
			att.log.Warn("output not sent: it contains the value of a secret", "key", k)
			a.systemLine(att, fmt.Sprintf("--- output %s not sent: its key or value contains the value of a secret ---", k))
		}
	}
	if len(out) > 0 {
		req.Outputs = out
	}
}

// removeOutputFile removes an attempt's VIGIL_OUTPUT file once it has
// ended.
func removeOutputFile(path string, log *slog.Logger) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("remove the task's VIGIL_OUTPUT file", "path", path, "err", err)
	}
}

// holdsSecret reports whether key or value contains a non-empty value of
// secrets.
func holdsSecret(secrets map[string]string, key, value string) bool {
	for _, s := range secrets {
		if s != "" && (strings.Contains(value, s) || strings.Contains(key, s)) {
			return true
		}
	}
	return false
}
