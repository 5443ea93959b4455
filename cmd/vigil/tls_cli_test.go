package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The TLS flags fail early (exit 2) with errors naming the flags and
// files; e2e/TestLiteOverHTTPS covers HTTPS end to end.
func TestTLSFlagErrorsNameFlagAndFile(t *testing.T) {
	clearClientEnv(t)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	notPEM := writeSecret(t, "not a certificate\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"lite: cert without key", []string{"lite", "--tls-cert-file", notPEM},
			"--tls-cert-file and --tls-key-file: give both"},
		{"lite: unreadable pair", []string{"lite", "--tls-cert-file", missing, "--tls-key-file", missing},
			"--tls-cert-file " + missing + " / --tls-key-file " + missing + ": no such file or directory"},
		{"agent: missing CA", []string{"agent", "--server", "https://127.0.0.1:1", "--token", "x", "--cacert", missing},
			"--cacert " + missing + ": no such file or directory"},
		{"client: CA without PEM", []string{"runs", "list", "--server", "https://127.0.0.1:1", "--token", "x", "--cacert", notPEM},
			"--cacert " + notPEM + ": holds no PEM certificate"},
		{"client: cert without key", []string{"runs", "list", "--server", "https://127.0.0.1:1", "--token", "x", "--client-cert-file", notPEM},
			"--client-cert-file and --client-key-file: give both or neither"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		require.Error(t, r.err, c.name)
		assert.Equal(t, exitUsage, r.code, "%s: %v", c.name, r.err)
		assert.Contains(t, r.err.Error(), c.want, c.name)
	}
}
