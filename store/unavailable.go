package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err (from Migrate, Status or
// OpenWithOptions) says the database could not be reached or is not
// accepting sessions yet, so that the same call may succeed later: the
// connection refused, reset or closed, a timeout, an unreachable host or
// a failed DNS lookup, SQLSTATE class 08 (connection exception), 57P01..03
// (admin shutdown, crash shutdown, cannot connect now: a server stopping
// or still starting) and 53300 (too many connections). A cancelled ctx
// is not unavailability. Everything else, such as bad SQL in a
// migration, a schema newer than the binary, a wrong password or a
// missing database, is permanent. `vigil server` retries only these at
// start-up (docs/operations.md, "Start-up").
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch c := pgErr.Code; {
		case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03", c == "53300":
			return true
		}
		return false
	}
	if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EPIPE, syscall.ETIMEDOUT, io.EOF, io.ErrUnexpectedEOF, net.ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && (dnsErr.IsTemporary || dnsErr.IsTimeout || dnsErr.IsNotFound)
}
