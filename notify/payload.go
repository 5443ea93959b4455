package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// RunLink is the console's link to a run under externalURL (the
// server's --external-url), or "" without one.
func RunLink(externalURL string, runID int64) string {
	if externalURL == "" {
		return ""
	}
	return strings.TrimRight(externalURL, "/") + "/#/runs/" + strconv.FormatInt(runID, 10)
}

// Payload is the JSON payload of n (docs/notifications.md). It depends
// only on the row and externalURL, so every attempt posts the same body.
func Payload(n store.Notification, externalURL string) protocol.WebhookPayload {
	return protocol.WebhookPayload{
		DeliveryID: n.DeliveryID, Event: n.Event, DAGID: n.DAGID, RunID: n.RunID, TaskID: n.TaskID,
		TryNumber: n.TryNumber, State: n.SubjectState, Reason: n.Reason, Message: n.Message,
		OccurredAt: n.CreatedAt.UTC(), URL: RunLink(externalURL, n.RunID),
	}
}

// Body encodes p for a webhook of format: the payload as JSON, or for
// slack a {"text": …} of one line that names the event, the run and the
// task, then the reason, the message and the link.
func Body(p protocol.WebhookPayload, format state.WebhookFormat) ([]byte, error) {
	if format != state.WebhookSlack {
		return json.Marshal(p)
	}
	return json.Marshal(protocol.SlackPayload{Text: SlackText(p)})
}

// SlackText is the text of a slack body.
func SlackText(p protocol.WebhookPayload) string {
	var b strings.Builder
	if p.Test {
		b.WriteString("[test] ")
	}
	fmt.Fprintf(&b, "Vigil %s: DAG %s run %d", p.Event, p.DAGID, p.RunID)
	if p.TaskID != "" {
		fmt.Fprintf(&b, " task %s try %d", p.TaskID, p.TryNumber)
	}
	fmt.Fprintf(&b, " is %s", p.State)
	if p.Reason != "" {
		fmt.Fprintf(&b, " (%s)", p.Reason)
	}
	if p.Message != "" {
		b.WriteString(": " + p.Message)
	}
	if p.URL != "" {
		fmt.Fprintf(&b, " <%s|open run>", p.URL)
	}
	return b.String()
}

// Sign returns the Vigil-Signature header value for body under secret:
// "sha256=" and the hex HMAC-SHA256, as GitHub's X-Hub-Signature-256. A
// receiver recomputes it over the raw body and compares in constant time.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether header is Sign(secret, body), in constant time:
// what a receiver written in Go does (docs/notifications.md).
func Verify(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}
