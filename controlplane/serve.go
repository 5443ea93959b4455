package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/vigil-sched/vigil/api"
)

// Listen opens the API's TCP address. A port already in use is a
// *FieldError of "Listen" wrapping syscall.EADDRINUSE; Start listens
// before any slow start-up work (initdb, migrations), so a busy port fails
// in milliseconds.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, &FieldError{Field: "Listen", Err: err, text: func(name string) string {
			return fmt.Sprintf("%s %s: the address is already in use (another vigil or another program holds it); "+
				"stop it or pick a free address", name, addr)
		}}
	}
	if err != nil {
		return nil, &FieldError{Field: "Listen", Err: err, text: func(name string) string {
			return fmt.Sprintf("%s %s: %v", name, addr, err)
		}}
	}
	return ln, nil
}

// memListener is an in-process net.Listener: Lite serves its own agents on
// it when the API is HTTPS, so they need neither a client certificate nor
// a CA, and nothing outside the process can reach it.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the server end of the next dial.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and further dials.
func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder address.
func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects a client end to the listener (an http.Transport DialContext).
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, errors.New("lite in-process API: closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// httpClient is an http.Client whose every connection goes to l.
func (l *memListener) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: l.dial, ForceAttemptHTTP2: false}}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "lite-in-process" }

// localAPI is how Lite's in-process agents reach the API: the public URL
// over plain HTTP, or, when the API is HTTPS, an in-process listener.
type localAPI struct {
	url    string
	client *http.Client // nil: the agent's default
}

// serveAPI serves srv on ln, over HTTPS when cfg is set, and returns the
// public base URL and the in-process access. With HTTPS a second server
// serves the same handler on an in-process listener, and srv.Shutdown
// closes it.
func serveAPI(srv *http.Server, ln net.Listener, cfg *tls.Config, log *slog.Logger) (public string, local localAPI) {
	serve := func(name string, run func() error) {
		go func() {
			if err := run(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "listener", name, "err", err)
			}
		}()
	}
	addr := ln.Addr().String()
	if cfg == nil {
		serve("tcp", func() error { return srv.Serve(ln) })
		return "http://" + addr, localAPI{url: "http://" + addr}
	}
	srv.TLSConfig = cfg
	serve("tcp", func() error { return srv.ServeTLS(ln, "", "") })
	// A server of its own: one http.Server serving a TLS and a plain
	// listener at once sets up HTTP/2 from two goroutines. srv's
	// shutdown closes it; Lite has drained its agents by then.
	mem := newMemListener()
	memSrv := api.NewHTTPServer(srv.Handler, api.TimeoutsOf(srv))
	srv.RegisterOnShutdown(func() { _ = memSrv.Close() })
	serve("in-process", func() error { return memSrv.Serve(mem) })
	return "https://" + addr, localAPI{url: "http://lite-in-process", client: mem.httpClient()}
}
