package api

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/identity"
)

// Session cookies: a round trip verifies until the expiry and not at it;
// a changed identity, a forged or truncated cookie, or a changed token is
// refused; the CSRF token is bound to one session.
func TestSessionCookieRules(t *testing.T) {
	s := &Server{cfg: Config{AgentToken: "ag", OperatorToken: "op", ViewerToken: "vw"}}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sess, err := s.newSession(identity.ViewerToken, now.Add(time.Hour))
	require.NoError(t, err)

	got, err := s.verifySession(sess.value, now.Add(59*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, identity.ViewerToken, got.id)
	_, err = s.verifySession(sess.value, now.Add(time.Hour))
	assert.ErrorContains(t, err, "expired at 2030-01-01T13:00:00Z")

	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	viewer := "." + b64("viewer") + "."
	expiryAt := len("v2") + len(viewer)
	for name, v := range map[string]string{
		"identity changed": strings.Replace(sess.value, viewer, "."+b64("operator")+".", 1),
		"expiry moved":     strings.Replace(sess.value, viewer+sess.value[expiryAt:expiryAt+4], viewer+"9999", 1),
		"mac cut":          sess.value[:len(sess.value)-4],
		"not a cookie":     "hello",
		"unknown identity": "v2." + b64("mallory") + ".1.2.3",
		"empty":            "",
		"extra part":       sess.value + ".x",
		"other version":    "v1" + sess.value[2:],
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
	second, err := s.newSession(identity.ViewerToken, now.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, s.csrfOK(sess, s.csrfToken(second)), "another session's CSRF token")
	assert.False(t, s.csrfOK(sess, ""))
}

// A named identity's session takes its role from the users file at each
// request (a lowered role applies at once); a new token or a removed
// entry ends it; and knowing the file (its hashes) is not enough to sign
// one: the key also needs the operator token.
func TestUserSessionFollowsTheUsersFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	write := func(body string) {
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	}
	entry := func(role, token string) string {
		return "- name: alice\n  role: " + role + "\n  token_sha256: " + identity.SumHex(token) + "\n"
	}
	write(entry("admin", "alice-token-1"))
	users, err := identity.Load(path, nil)
	require.NoError(t, err)
	s := &Server{cfg: Config{AgentToken: "ag", OperatorToken: "op", Users: users}}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	e, ok := users.ByName("alice")
	require.True(t, ok)
	sess, err := s.newSession(e.Identity(), now.Add(time.Hour))
	require.NoError(t, err)
	got, err := s.verifySession(sess.value, now)
	require.NoError(t, err)
	assert.Equal(t, identity.Identity{Name: "alice", Role: identity.Admin}, got.id)

	forger := &Server{cfg: Config{AgentToken: "ag", OperatorToken: "guessed", Users: users}}
	_, err = forger.verifySession(sess.value, now)
	assert.ErrorContains(t, err, "bad signature", "the users file alone signs no session")

	write(entry("viewer", "alice-token-1") + "# lowered\n")
	require.NoError(t, users.Reload())
	got, err = s.verifySession(sess.value, now)
	require.NoError(t, err)
	assert.Equal(t, identity.Viewer, got.id.Role, "the role is the file's now, not the one at sign-in")

	write(entry("viewer", "alice-token-2"))
	require.NoError(t, users.Reload())
	_, err = s.verifySession(sess.value, now)
	assert.ErrorContains(t, err, "bad signature", "a new token ends the old token's sessions")

	write("- name: bob\n  role: viewer\n  token_sha256: " + identity.SumHex("bob-token-1") + "\n")
	require.NoError(t, users.Reload())
	_, err = s.verifySession(sess.value, now)
	assert.ErrorContains(t, err, "bad signature", "a removed identity has no sessions")
}
