package api

import (
	"net/http"
	"time"
)

// Timeouts are an HTTP server's per-connection bounds (docs/security.md,
// "Limits"): without them a client that sends its request slowly, or
// never reads the reply, holds a connection and its goroutine forever.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included: a 40 MiB log
	// batch at 1 MB/s fits.
	Read time.Duration
	// Write bounds the time from the end of the request's headers to the
	// end of the reply: it must outlast the longest long poll, the claim's
	// MaxClaimWait, plus the claim's own statements.
	Write time.Duration
	// Idle bounds a kept-alive connection between requests.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of vigil lite's and vigil server's API.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: MaxClaimWait + 30*time.Second, Idle: 2 * time.Minute}
}

// NewHTTPServer returns an http.Server serving h with the timeouts t.
func NewHTTPServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// TimeoutsOf reads the timeouts back from srv, for a second server of
// the same handler (Lite's in-process listener).
func TimeoutsOf(srv *http.Server) Timeouts {
	return Timeouts{ReadHeader: srv.ReadHeaderTimeout, Read: srv.ReadTimeout, Write: srv.WriteTimeout, Idle: srv.IdleTimeout}
}
