package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Request is one task for the supervisor to start.
type Request struct {
	// Argv is the task's command; Argv[0] is looked up in Env's PATH
	// when it has no slash, as a shell would.
	Argv []string
	// Env is the task's whole environment, "NAME=value" entries.
	Env []string
	// As is the user to run the task as; nil: the supervisor's own, in
	// the supervisor's working directory.
	As *Identity
	// Stdout and Stderr are the write ends of the task's output; the
	// supervisor gets its own copies with the request. Stdin is
	// /dev/null.
	Stdout, Stderr *os.File
}

// maxRequest bounds a start request's body in bytes: execve refuses an
// argument list and environment past a few MiB anyway (ARG_MAX).
const maxRequest = 8 << 20

// encode is r's body with id: NUL-separated fields, which need no
// escaping, since no argument or environment entry can hold a NUL:
//
//	start id uid gid groups dir argc argv... env...
//
// uid and gid are -1, groups and dir empty, without an identity; groups
// are comma-separated gids. The wire form is the body's length (4 bytes,
// big-endian) and the body, sent with Stdout and Stderr as SCM_RIGHTS.
func (r Request) encode(id uint64) ([]byte, error) {
	if len(r.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	uid, gid, groups, dir := "-1", "-1", "", ""
	if as := r.As; as != nil {
		uid, gid, dir = strconv.Itoa(as.UID), strconv.Itoa(as.GID), as.Dir
		gs := make([]string, len(as.Groups))
		for i, g := range as.Groups {
			gs[i] = strconv.Itoa(g)
		}
		groups = strings.Join(gs, ",")
	}
	fields := append([]string{"start", strconv.FormatUint(id, 10), uid, gid, groups, dir, strconv.Itoa(len(r.Argv))}, r.Argv...)
	fields = append(fields, r.Env...)
	n := 4
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("command or environment entry %q holds a NUL byte", f)
		}
		n += len(f) + 1
	}
	if n > maxRequest {
		return nil, fmt.Errorf("command and environment take %d bytes, more than the %d a task may have", n, maxRequest)
	}
	b := binary.BigEndian.AppendUint32(make([]byte, 0, n), uint32(n-4))
	for _, f := range fields {
		b = append(append(b, f...), 0)
	}
	return b, nil
}

// request is a decoded start request.
type request struct {
	id   uint64
	as   *Identity
	argv []string
	env  []string
}

// decodeRequest parses encode's body; each error names the field.
func decodeRequest(body []byte) (request, error) {
	var r request
	if len(body) == 0 || body[len(body)-1] != 0 {
		return r, errors.New("request: not NUL-terminated")
	}
	f := strings.Split(string(body[:len(body)-1]), "\x00")
	if len(f) < 8 || f[0] != "start" {
		return r, fmt.Errorf("request: %d fields, want at least 8 starting with \"start\"", len(f))
	}
	var err error
	if r.id, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return r, fmt.Errorf("request: task id %q: %w", f[1], err)
	}
	argc, err := strconv.Atoi(f[6])
	if err != nil || argc < 1 || argc > len(f)-7 {
		return r, fmt.Errorf("request %d: argc %q: must be 1..%d", r.id, f[6], len(f)-7)
	}
	r.argv, r.env = f[7:7+argc], f[7+argc:]
	if f[2] == "-1" && f[3] == "-1" && f[4] == "" && f[5] == "" {
		return r, nil
	}
	uid, err1 := strconv.Atoi(f[2])
	gid, err2 := strconv.Atoi(f[3])
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("request %d: uid %q, gid %q: %w", r.id, f[2], f[3], err)
	}
	if r.as, err = parseIdentity(uid, gid, f[4], f[5]); err != nil {
		return r, fmt.Errorf("request %d: %w", r.id, err)
	}
	return r, nil
}

// parseIdentity checks an identity's fields, which come all together;
// each error names the field and the rule.
func parseIdentity(uid, gid int, groups, dir string) (*Identity, error) {
	switch {
	case uid <= 0:
		return nil, fmt.Errorf("uid: must be greater than 0 (a task never runs as root this way), got %d", uid)
	case gid < 0:
		return nil, fmt.Errorf("gid: required with uid, and not negative, got %d", gid)
	case dir == "" || dir[0] != '/':
		return nil, fmt.Errorf("dir: required with uid, an absolute path, got %q", dir)
	}
	as := &Identity{UID: uid, GID: gid, Dir: dir}
	if groups != "" {
		for _, g := range strings.Split(groups, ",") {
			n, err := strconv.Atoi(g)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("groups: %q must be a comma-separated list of gids", groups)
			}
			as.Groups = append(as.Groups, n)
		}
	}
	return as, nil
}
