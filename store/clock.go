package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClockConn reads the database clock over a connection of its own, so a
// leader's stall detector measures whether the process and the database
// can run, never whether the shared pool had a free connection. Safe for
// concurrent use; it reconnects after an error.
type ClockConn struct {
	url  string
	mu   sync.Mutex
	conn *pgx.Conn
}

// ClockConn returns a clock on a dedicated connection to this store's
// database. It connects on first use; Close releases it.
func (s *Store) ClockConn() *ClockConn { return &ClockConn{url: s.url} }

// Now returns now() on the database clock. Errors: the connection or the
// query failed (the next call reconnects), or ctx ended.
func (c *ClockConn) Now(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		conn, err := pgx.Connect(ctx, c.url)
		if err != nil {
			return time.Time{}, err
		}
		c.conn = conn
	}
	var t time.Time
	if err := c.conn.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		c.closeLocked()
		return time.Time{}, err
	}
	return t, nil
}

// Close closes the connection, if open.
func (c *ClockConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

// closeLocked drops the connection, bounded in time: the server may be the
// thing that is frozen.
func (c *ClockConn) closeLocked() {
	if c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.conn.Close(ctx)
	c.conn = nil
}
