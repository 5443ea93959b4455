package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/identity"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// A session cookie's signature is checked before the database is asked
// anything: on a server whose database is gone, a forged cookie is a 401
// (no round trip was tried), while a well-signed one needs the database
// (its expiry is on the database clock) and gets the 503.
func TestSessionSignatureBeforeDatabase(t *testing.T) {
	st, err := store.Open(context.Background(), storetest.DB(t))
	require.NoError(t, err)
	st.Close() // every database access now fails
	s := &Server{cfg: Config{Store: st, AgentToken: "ag", OperatorToken: "op"}, log: slog.New(slog.DiscardHandler)}
	good, err := s.newSession(identity.OperatorToken, time.Now().Add(time.Hour))
	require.NoError(t, err)
	forged := good.value[:len(good.value)-4] + "AAAA"

	identify := func(v string) *authError {
		r := httptest.NewRequest("GET", "/v1/runs", nil)
		r.AddCookie(&http.Cookie{Name: protocol.SessionCookie, Value: v})
		_, aerr := s.identify(r)
		return aerr
	}
	aerr := identify(forged)
	require.NotNil(t, aerr)
	assert.Equal(t, http.StatusUnauthorized, aerr.status, aerr.msg)
	assert.Contains(t, aerr.msg, "bad signature")

	aerr = identify(good.value)
	require.NotNil(t, aerr)
	assert.Equal(t, http.StatusServiceUnavailable, aerr.status, "a good signature goes on to the database: %s", aerr.msg)
}

// With the database gone, /readyz says so without the driver's text (for
// the log, under the request id the reply names).
func TestReadyzDatabaseErrorIsGeneric(t *testing.T) {
	st, err := store.Open(context.Background(), storetest.DB(t))
	require.NoError(t, err)
	st.Close()
	s := &Server{cfg: Config{Store: st}, log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest("GET", "/readyz", nil)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, "req-1"))
	rec := httptest.NewRecorder()
	s.readyz(rec, r)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.JSONEq(t, `{"status":"not ready","error":"database unreachable; the server log has the detail under request id req-1"}`, rec.Body.String())
}
