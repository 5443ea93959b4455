package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/agent"
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
