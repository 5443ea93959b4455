package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store/storetest"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
	client                                           tls.Certificate
}

// newTestPKI generates the certificates with crypto/x509, no tools.
func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vigil e2e CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certName, keyName string) (string, string) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(k)
		require.NoError(t, err)
		return write(certName, "CERTIFICATE", der), write(keyName, "PRIVATE KEY", keyDER)
	}
	p := testPKI{ca: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	p.serverCert, p.serverKey = leaf(2, "vigil server", x509.ExtKeyUsageServerAuth, "server.pem", "server-key.pem")
	p.clientCert, p.clientKey = leaf(3, "vigil client", x509.ExtKeyUsageClientAuth, "client.pem", "client-key.pem")
	p.client, err = tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	require.NoError(t, err)
	return p
}

// clientArgs are the CLI and agent flags that trust the CA and present
// the client certificate.
func (p testPKI) clientArgs() []string {
	return []string{"--cacert", p.ca, "--client-cert-file", p.clientCert, "--client-key-file", p.clientKey}
}

// TLS on the API: a Lite serving HTTPS (and requiring client
// certificates) runs a DAG with one in-process agent and one external
// `vigil agent`, triggered and awaited by the CLI over HTTPS; the run
// succeeds. Plain HTTP against the TLS port fails with a message that says
// so, from the CLI and from an agent; a CLI without --cacert fails on the
// unknown authority.
func TestLiteOverHTTPS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	dags := t.TempDir()
	writeDAG(t, dags, "secure", `
dag_id: secure
tasks:
  - id: local
    tags: [lite]
    command: ["sh", "-c", "echo in-process"]
  - id: remote
    tags: [remote]
    depends_on: [local]
    command: ["sh", "-c", "echo remote"]
`)
	port := freePort(t)
	https := fmt.Sprintf("https://127.0.0.1:%d", port)
	plain := fmt.Sprintf("http://127.0.0.1:%d", port)
	tokenDir := t.TempDir()
	opFile := filepath.Join(tokenDir, "operator.token")
	agentFile := filepath.Join(tokenDir, "agent.token")
	require.NoError(t, os.WriteFile(opFile, []byte(operatorToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(agentFile, []byte(agentToken+"\n"), 0o600))

	args := []string{"lite", "--database-url", storetest.DB(t), "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--agents", "1", "--agent-tags", "lite", "--agent-token-file", agentFile, "--operator-token-file", opFile,
		"--log-format", "json", "--tick-interval", "200ms", "--heartbeat-interval", "1s", "--drain-timeout", "5s",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--dags", dags,
		"--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey, "--tls-client-ca-file", pki.ca}
	logPath := filepath.Join(t.TempDir(), "lite-tls.log")
	printLogTail(t, "lite-tls", logPath)
	lite := startProc(t, "lite-tls", logPath, args, []string{"TMPDIR=" + t.TempDir()})
	tlsClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}}}
	waitFor(t, readyTimeout, func() bool {
		require.False(t, lite.exited(), "Lite exited before it was ready")
		resp, err := tlsClient.Get(https + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "Lite answering /readyz over HTTPS")

	agent := startAgent(t, []string{https}, "", "tls-agent",
		append([]string{"--token-file", agentFile, "--tags", "remote"}, pki.clientArgs()...)...)
	agentID(t, agent, 30*time.Second)

	env := []string{"VIGIL_SERVER=" + https, "VIGIL_TOKEN_FILE=" + opFile}
	r := runVigil(t, env, append([]string{"runs", "trigger", "secure", "--wait", "-o", "json"}, pki.clientArgs()...)...)
	require.Equal(t, 0, r.Code, "the run succeeds over HTTPS: %s", r.Stderr)
	var d protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), r.Stdout)
	assert.Equal(t, "success", d.State)
	for _, ti := range d.TaskInstances {
		assert.Equal(t, "success", ti.State, "task %s", ti.TaskID)
	}

	// Plain HTTP against the TLS port: the CLI says what is wrong.
	r = runVigil(t, []string{"VIGIL_SERVER=" + plain, "VIGIL_TOKEN_FILE=" + opFile}, "runs", "list")
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stderr, "the server speaks HTTPS but this request used plain HTTP")
	assert.Contains(t, r.Stderr, "Client sent an HTTP request to an HTTPS server")

	// So does an agent, which gives up at once.
	wrong := startAgent(t, []string{plain}, "", "plain-agent", "--token-file", agentFile)
	assert.Equal(t, 1, wrong.waitExit(t, 30*time.Second), "an agent pointed at the HTTPS port over plain HTTP exits 1")
	logText, err := os.ReadFile(wrong.logPath)
	require.NoError(t, err)
	assert.Contains(t, string(logText), "the server speaks HTTPS but this request used plain HTTP")

	// HTTPS without the CA: the certificate is not trusted.
	r = runVigil(t, env, "runs", "list")
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stderr, "certificate signed by unknown authority")
	// And the server refuses a client without a certificate.
	r = runVigil(t, env, "runs", "list", "--cacert", pki.ca)
	assert.Equal(t, 1, r.Code, "no client certificate: %s", r.Stderr)
}
