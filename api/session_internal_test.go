package api

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Session cookies: a round trip verifies until the expiry and not at it;
// a changed role, a forged or truncated cookie, or a changed token is
// refused; the CSRF token is bound to one session.
func TestSessionCookieRules(t *testing.T) {
	s := &Server{cfg: Config{AgentToken: "ag", OperatorToken: "op", ViewerToken: "vw"}}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sess, err := s.newSession(roleViewer, now.Add(time.Hour))
	require.NoError(t, err)

	got, err := s.verifySession(sess.value, now.Add(59*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, roleViewer, got.role)
	_, err = s.verifySession(sess.value, now.Add(time.Hour))
	assert.ErrorContains(t, err, "expired at 2030-01-01T13:00:00Z")

	for name, v := range map[string]string{
		"role changed":  strings.Replace(sess.value, ".viewer.", ".operator.", 1),
		"expiry moved":  strings.Replace(sess.value, ".viewer."+sess.value[len("v1.viewer."):len("v1.viewer.")+4], ".viewer.9999", 1),
		"mac cut":       sess.value[:len(sess.value)-4],
		"not a cookie":  "hello",
		"unknown role":  "v1.admin.1.2.3",
		"empty":         "",
		"extra part":    sess.value + ".x",
		"other version": "v2" + sess.value[2:],
	} {
		_, err := s.verifySession(v, now)
		assert.Error(t, err, name)
	}

	other := &Server{cfg: Config{AgentToken: "ag", OperatorToken: "op", ViewerToken: "vw2"}}
	_, err = other.verifySession(sess.value, now)
	assert.ErrorContains(t, err, "bad signature", "a new viewer token ends the viewer's sessions")
	_, err = (&Server{cfg: Config{AgentToken: "ag", OperatorToken: "op"}}).verifySession(sess.value, now)
	assert.Error(t, err, "no viewer token configured: no viewer session")

	assert.True(t, s.csrfOK(sess, s.csrfToken(sess)))
	second, err := s.newSession(roleViewer, now.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, s.csrfOK(sess, s.csrfToken(second)), "another session's CSRF token")
	assert.False(t, s.csrfOK(sess, ""))
}
