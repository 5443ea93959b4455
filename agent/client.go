package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// APIError is a non-2xx reply from the control plane. Code and Message come
// from the protocol.ErrorBody when the body is one; Code is empty otherwise
// (a proxy's error page, for instance).
type APIError struct {
	Op      string // "register", "claim", "heartbeat", "complete" or "logs"
	Status  int    // HTTP status code
	Code    string // protocol.Code*, e.g. "stale_attempt"
	Message string
}

// Error describes the failed operation, status and server message.
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

// maxErrorBody bounds how much of an error reply is read.
const maxErrorBody = 64 << 10

// client posts JSON to one base URL at a time with a bearer token and,
// once registered, the agent's own credential.
type client struct {
	http  *http.Client
	token string

	credMu     sync.Mutex
	credential string // from the last register reply; "" before the first
}

// setCredential stores the credential of a register reply. It lives in
// memory only: it proves a reconnect of this process is the same agent.
func (c *client) setCredential(cred string) {
	c.credMu.Lock()
	c.credential = cred
	c.credMu.Unlock()
}

func (c *client) getCredential() string {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	return c.credential
}

// post sends in as JSON to base+path and decodes a 2xx reply into out (nil:
// ignore the body). A non-2xx reply is an *APIError; anything else is a
// transport or decoding error, which callers treat as an outage.
func (c *client) post(ctx context.Context, op, url string, timeout time.Duration, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if cred := c.getCredential(); cred != "" {
		req.Header.Set(protocol.HeaderAgentCredential, cred)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer func() {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readAPIError(op, resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s: decode reply: %w", op, err)
	}
	return nil
}

// noRedirects returns a copy of hc that follows no redirect: a 3xx reply
// comes back as an *APIError. Go would otherwise send the request again to
// the Location, with the agent's token and its Vigil-Agent-Credential
// header when the new host looks alike, so whoever can make a replica (or
// something in front of it) answer 3xx would collect the agent's secrets
// (docs/security.md).
func noRedirects(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func readAPIError(op string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Op: op, Status: resp.StatusCode}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		e.Message = fmt.Sprintf("the server redirected to %q; the agent follows no redirect: give --server the API's own address",
			resp.Header.Get("Location"))
		return e
	}
	var body protocol.ErrorBody
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		e.Message = protocol.ExplainNonProtocolReply(resp.StatusCode, string(bytes.TrimSpace(raw)))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

// isTransient reports whether err means the control plane is unreachable
// or unhealthy, so the request should be buffered and retried after a
// reconnect: any transport error, a 5xx, 408 or 429 (docs/design.md §4).
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return true
	}
	return ae.Status >= 500 || ae.Status == http.StatusRequestTimeout || ae.Status == http.StatusTooManyRequests
}

// isAgentGone reports a 404 not_found (the server forgot this agent) or a
// 403 agent_credential (its name was taken over by a restarted process
// after it fell silent): either way it must register again.
func isAgentGone(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	return (ae.Status == http.StatusNotFound && ae.Code == protocol.CodeNotFound) ||
		(ae.Status == http.StatusForbidden && ae.Code == protocol.CodeAgentCredential)
}

// needsReconnect reports whether err should take the link down: an outage,
// or a server that forgot the agent.
func needsReconnect(err error) bool { return isTransient(err) || isAgentGone(err) }

// isStale reports a 409 stale_attempt reply to a completion.
func isStale(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict && ae.Code == protocol.CodeStaleAttempt
}
