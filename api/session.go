package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/identity"
)

// SessionTTL is how long a console session lasts after sign-in.
const SessionTTL = 12 * time.Hour

// session is a verified console session cookie. The cookie
// "v2.<identity name, base64url>.<expiry unix s>.<nonce>.<mac>" names
// its identity and is signed with a key derived from that identity's
// token (sessionKey), so every replica verifies it without a shared
// table, and changing a token ends that identity's sessions. The role is
// the identity's at each request, not at sign-in: a role lowered in the
// users file applies to open sessions at once, and a removed entry ends
// them. Signing out records the cookie's hash in PostgreSQL
// (store.RevokeSession), which every replica reads after the signature
// holds.
type session struct {
	id      identity.Identity
	expires time.Time
	value   string // the whole cookie value, which the CSRF token is bound to
}

// sessionKey is the HMAC key of name's sessions and its identity now; nil
// when name is no identity. For the built-in tokens it is a hash of the
// token, so the token itself never keys a MAC another context might also
// compute. A users file entry holds only its token's hash, which is no
// secret (whoever reads the file has it), so its key also hashes in the
// operator token, which every replica holds and no reader of the file
// does; the entry's hash makes a new token end the old one's sessions.
func (s *Server) sessionKey(name string) ([]byte, identity.Identity) {
	var seed string
	var id identity.Identity
	switch {
	case name == identity.OperatorToken.Name:
		seed, id = s.cfg.OperatorToken, identity.OperatorToken
	case name == identity.ViewerToken.Name && s.cfg.ViewerToken != "":
		seed, id = s.cfg.ViewerToken, identity.ViewerToken
	default:
		e, ok := s.cfg.Users.ByName(name)
		if !ok {
			return nil, id
		}
		seed, id = s.cfg.OperatorToken+"\x00user\x00"+e.Name+"\x00"+e.TokenSHA256, e.Identity()
	}
	k := sha256.Sum256([]byte("vigil console session\x00" + seed))
	return k[:], id
}

func mac(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession mints a session cookie value for id expiring at expires.
func (s *Server) newSession(id identity.Identity, expires time.Time) (*session, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	key, _ := s.sessionKey(id.Name)
	if key == nil {
		return nil, fmt.Errorf("session for %q: no such identity", id.Name)
	}
	body := fmt.Sprintf("v2.%s.%d.%s", base64.RawURLEncoding.EncodeToString([]byte(id.Name)), expires.Unix(),
		base64.RawURLEncoding.EncodeToString(nonce))
	return &session{id: id, expires: expires, value: body + "." + mac(key, body)}, nil
}

// verifySession checks a cookie value's signature and expiry against now
// (the database clock).
func (s *Server) verifySession(v string, now time.Time) (*session, error) {
	sess, err := s.verifySignature(v)
	if err != nil {
		return nil, err
	}
	return sess, sess.checkExpiry(now)
}

// revocationID is the session's revocation key: the SHA-256 of the whole
// cookie, so the table of signed-out sessions holds nothing that would
// sign in.
func (sess *session) revocationID() []byte {
	h := sha256.Sum256([]byte(sess.value))
	return h[:]
}

// checkExpiry refuses a session at or after its expiry; now is the
// database clock's.
func (sess *session) checkExpiry(now time.Time) error {
	if !now.Before(sess.expires) {
		return fmt.Errorf("expired at %s", sess.expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// verifySignature checks a cookie value's form and signature, and nothing
// that needs the database: a forged cookie costs no round trip.
func (s *Server) verifySignature(v string) (*session, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != "v2" {
		return nil, errors.New("malformed")
	}
	name, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errors.New("malformed identity")
	}
	key, id := s.sessionKey(string(name))
	body := strings.Join(parts[:4], ".")
	if key == nil || !hmac.Equal([]byte(parts[4]), []byte(mac(key, body))) {
		return nil, errors.New("bad signature (was the token changed or the identity removed?)")
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return nil, errors.New("malformed expiry")
	}
	return &session{id: id, expires: time.Unix(exp, 0), value: v}, nil
}

// csrfToken is the double-submit token bound to one session: a page of
// the console reads it from GET /v1/session and echoes it in HeaderCSRF;
// another site can neither read it nor forge it.
func (s *Server) csrfToken(sess *session) string {
	key, _ := s.sessionKey(sess.id.Name)
	return mac(key, "csrf", sess.value)
}

func (s *Server) csrfOK(sess *session, got string) bool {
	return got != "" && hmac.Equal([]byte(got), []byte(s.csrfToken(sess)))
}

type callerKey struct{}

func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// sessionReply is who c is (GET /v1/session, vigil whoami): its name,
// role and how it authenticated, with the session's expiry and CSRF token
// when by session.
func (s *Server) sessionReply(c caller) protocol.Session {
	out := protocol.Session{Name: c.id.Name, Role: string(c.id.Role), Auth: c.via(), ViewerConfigured: s.cfg.ViewerToken != ""}
	if c.session != nil {
		exp := c.session.expires.UTC()
		out.ExpiresAt = &exp
		out.CSRFToken = s.csrfToken(c.session)
	}
	return out
}

// signIn exchanges an identity's token (the operator or viewer token, or
// a users file entry's) for a session cookie naming the identity:
// HttpOnly (page scripts cannot read it), SameSite=Strict (no other site
// sends it) and Secure when served over TLS. 401 for any other token, 403
// for the agent token.
//
// Attempts are throttled per client address before the body is read
// (throttle.go): past the bound, 429 rate_limited with Retry-After. The
// throttle runs on this process's clock, not the database's: it must cost
// no round trip.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if ok, wait := s.signIns.allow(clientAddr(r), time.Now()); !ok {
		s.authFailed(r, "rate_limited", "too many sign-in attempts from this address")
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, protocol.CodeRateLimited, fmt.Sprintf(
			"too many sign-in attempts from %s; try again in %d s", clientAddr(r), secs))
		return
	}
	var req protocol.SessionRequest
	if !decode(w, r, &req) {
		return
	}
	c := s.tokenCaller(req.Token)
	switch {
	case c.agent:
		s.authFailed(r, "sign_in", "an agent token cannot sign in to the console")
		writeError(w, http.StatusForbidden, protocol.CodeForbidden, "token: an agent token cannot sign in to the console")
		return
	case !c.known():
		s.authFailed(r, "sign_in", "not the token of an identity")
		writeError(w, http.StatusUnauthorized, protocol.CodeUnauthorized, "token: not the operator or viewer token, nor a token of the users file")
		return
	}
	auditCaller(r, c)
	now, err := s.cfg.Store.Now(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	sess, err := s.newSession(c.id, now.Add(SessionTTL))
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: protocol.SessionCookie, Value: sess.value, Path: "/", MaxAge: int(SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	s.log.Info("console sign-in", "identity", c.id.Name, "role", c.id.Role, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, s.sessionReply(caller{id: c.id, session: sess}))
}

// getSession tells the console who it is signed in as and its CSRF token.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.sessionReply(callerOf(r.Context())))
}

// signOut ends the session of the request's cookie on every replica (its
// hash is recorded in PostgreSQL until its expiry) and clears the cookie.
// A missing or forged cookie has nothing to end: the cookie is cleared
// all the same. It needs no CSRF token: another site could at worst sign
// the user out, and SameSite=Strict keeps it from sending the cookie.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: protocol.SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	if c, err := r.Cookie(protocol.SessionCookie); err == nil {
		if sess, err := s.verifySignature(c.Value); err == nil {
			auditCaller(r, caller{id: sess.id, session: sess})
			if err := s.cfg.Store.RevokeSession(r.Context(), sess.revocationID(), sess.expires); err != nil {
				s.writeStoreError(w, r, err)
				return
			}
			s.log.Info("console sign-out", "identity", sess.id.Name, "remote", r.RemoteAddr)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
