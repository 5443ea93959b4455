package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// The agent follows no redirect: a real server that answers 307 to the
// agent's requests gets an error back, and the host it points to never
// sees a request, so neither the token nor the agent credential leave.
// (Go follows a 307 with the body and, to a host it deems alike, every
// header.)
func TestAgentFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()

	a, err := New(Config{Servers: []string{redirect.URL}, Token: fakeToken, Name: "redirected"})
	require.NoError(t, err)
	a.cl.setCredential("agent-credential-secret")
	err = a.cl.post(context.Background(), "heartbeat", redirect.URL+"/v1/agents/1/heartbeat", 5*time.Second,
		protocol.HeartbeatRequest{}, nil)

	var ae *APIError
	require.True(t, errors.As(err, &ae), "a redirect is an API error, not followed: %v", err)
	assert.Equal(t, http.StatusTemporaryRedirect, ae.Status)
	assert.Contains(t, ae.Message, "follows no redirect")
	assert.Contains(t, ae.Message, target.URL)
	assert.Zero(t, reached.Load(), "the redirect's target got a request")

	// The same holds for an HTTP client the caller supplies (the CLI's,
	// with its TLS settings), and the caller's client is left as it was.
	own := &http.Client{}
	b, err := New(Config{Servers: []string{redirect.URL}, Token: fakeToken, Name: "own", HTTPClient: own})
	require.NoError(t, err)
	err = b.cl.post(context.Background(), "register", redirect.URL+"/v1/agents/register", 5*time.Second,
		protocol.RegisterRequest{}, nil)
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Zero(t, reached.Load())
	assert.Nil(t, own.CheckRedirect)
}
