package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/api"
)

// TLS on the API (docs/configuration.md, "TLS"). `vigil lite` and
// `vigil server` serve HTTPS with --tls-cert-file and --tls-key-file, and
// with --tls-client-ca-file also require client certificates issued by
// that CA. `vigil agent` and the client commands verify the server with
// --cacert (default: the system roots) and may present a client
// certificate with --client-cert-file and --client-key-file.

// serveTLSOpts are the serving flags of lite and server.
type serveTLSOpts struct {
	certFile, keyFile, clientCAFile string
}

// addServeTLSFlags adds --tls-cert-file, --tls-key-file and
// --tls-client-ca-file to f.
func addServeTLSFlags(f *pflag.FlagSet, o *serveTLSOpts) {
	f.StringVar(&o.certFile, "tls-cert-file", "", "serve HTTPS with this certificate (PEM, chain after the leaf); needs --tls-key-file")
	f.StringVar(&o.keyFile, "tls-key-file", "", "private key (PEM) of --tls-cert-file")
	f.StringVar(&o.clientCAFile, "tls-client-ca-file", "", "require client certificates issued by this CA (PEM) on every HTTPS request")
}

// config builds the server TLS config; nil when HTTPS is off. Errors
// (usage, exit 2) name the flags and files.
func (o *serveTLSOpts) config() (*tls.Config, error) {
	switch {
	case o.certFile == "" && o.keyFile == "" && o.clientCAFile == "":
		return nil, nil
	case o.certFile == "" || o.keyFile == "":
		return nil, usageError("--tls-cert-file and --tls-key-file: give both to serve HTTPS (--tls-client-ca-file needs them too)")
	}
	pair, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
	if err != nil {
		return nil, usageError("--tls-cert-file %s / --tls-key-file %s: %v", o.certFile, o.keyFile, pathErr(err))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if o.clientCAFile != "" {
		pool, err := loadCertPool("--tls-client-ca-file", o.clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// loadCertPool reads PEM certificates from path for flag.
func loadCertPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("%s %s: %v", flag, path, pathErr(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usageError("%s %s: holds no PEM certificate", flag, path)
	}
	return pool, nil
}

// clientTLSOpts are the client-side flags of the agent and the CLI.
type clientTLSOpts struct {
	caCert, certFile, keyFile string
}

// addClientTLSFlags adds --cacert, --client-cert-file and
// --client-key-file to f.
func addClientTLSFlags(f *pflag.FlagSet, o *clientTLSOpts) {
	f.StringVar(&o.caCert, "cacert", "", "CA certificate(s) (PEM) to verify the server's HTTPS certificate; default: the system roots")
	f.StringVar(&o.certFile, "client-cert-file", "", "client certificate (PEM) to present over HTTPS; needs --client-key-file")
	f.StringVar(&o.keyFile, "client-key-file", "", "private key (PEM) of --client-cert-file")
}

// config builds the client TLS config; nil when no flag is set (the
// default transport, system roots). Errors name the flags and files.
func (o *clientTLSOpts) config() (*tls.Config, error) {
	if o.caCert == "" && o.certFile == "" && o.keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.caCert != "" {
		pool, err := loadCertPool("--cacert", o.caCert)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, usageError("--client-cert-file and --client-key-file: give both or neither")
	}
	if o.certFile != "" {
		pair, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, usageError("--client-cert-file %s / --client-key-file %s: %v", o.certFile, o.keyFile, pathErr(err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// httpClient returns an *http.Client using the TLS flags, with timeout
// (0: none, for the agent, whose requests carry their own deadlines); nil
// when no flag is set and timeout is 0 (the caller's default).
func (o *clientTLSOpts) httpClient(timeout time.Duration) (*http.Client, error) {
	cfg, err := o.config()
	if err != nil || (cfg == nil && timeout == 0) {
		return nil, err
	}
	c := &http.Client{Timeout: timeout}
	if cfg != nil {
		tr := agent.NewTransport()
		tr.TLSClientConfig = cfg
		c.Transport = tr
	}
	return c, nil
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

// serveAPI serves srv on ln, over HTTPS when o configures it, and returns
// the public base URL and the in-process access. With HTTPS a second
// server serves the same handler on an in-process listener, and
// srv.Shutdown closes it.
func serveAPI(srv *http.Server, ln net.Listener, o *serveTLSOpts, log *slog.Logger) (public string, local localAPI, err error) {
	var cfg *tls.Config
	if o != nil {
		if cfg, err = o.config(); err != nil {
			return "", localAPI{}, err
		}
	}
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
		return "http://" + addr, localAPI{url: "http://" + addr}, nil
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
	return "https://" + addr, localAPI{url: "http://lite-in-process", client: mem.httpClient()}, nil
}
