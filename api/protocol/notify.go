package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/vigil-sched/vigil/state"
)

// Webhook delivery headers (docs/notifications.md).
const (
	// HeaderDeliveryID carries a notification's delivery id: the same on
	// every attempt of one notification, so a receiver drops duplicates.
	HeaderDeliveryID = "Vigil-Delivery-Id"
	// HeaderSignature carries "sha256=" and the hex HMAC-SHA256 of the
	// body under the webhook's secret, when it has one (as GitHub's
	// X-Hub-Signature-256).
	HeaderSignature = "Vigil-Signature"
	// HeaderEvent carries the payload's event, for routing without
	// parsing the body.
	HeaderEvent = "Vigil-Event"
)

// WebhookPayload is the JSON body a json webhook receives for one
// notification (docs/notifications.md). Fields of a TI are empty for a
// run's event. Times are the database clock's, RFC 3339.
type WebhookPayload struct {
	// DeliveryID equals the Vigil-Delivery-Id header.
	DeliveryID string            `json:"delivery_id"`
	Event      state.NotifyEvent `json:"event"`
	DAGID      string            `json:"dag_id"`
	RunID      int64             `json:"run_id"`
	TaskID     string            `json:"task_id,omitempty"`
	TryNumber  int               `json:"try_number,omitempty"`
	// State is the TI's state (task events) or the run's (run events and
	// sla_missed) that the event reports.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// OccurredAt is when the state change that raised it committed its
	// row (the database clock).
	OccurredAt time.Time `json:"occurred_at"`
	// URL links the run in the console, from the server's
	// --external-url; empty without one.
	URL string `json:"url,omitempty"`
	// Test is true for `vigil webhooks test` only.
	Test bool `json:"test,omitempty"`
}

// SlackPayload is the body a slack webhook receives.
type SlackPayload struct {
	Text string `json:"text"`
}

// Webhook is one webhook as the API shows it: never its secret.
type Webhook struct {
	Name      string              `json:"name"`
	URL       string              `json:"url"`
	Format    state.WebhookFormat `json:"format"`
	HasSecret bool                `json:"has_secret"`
	CreatedAt time.Time           `json:"created_at"`
	UpdatedAt time.Time           `json:"updated_at"`
}

// WebhookList is the reply of GET /v1/webhooks, by name.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// SetWebhookRequest is the body of PUT /v1/webhooks/{name}. It replaces
// the whole webhook: an empty Secret stores it without one.
type SetWebhookRequest struct {
	URL    string              `json:"url"`
	Format state.WebhookFormat `json:"format,omitempty"` // default json
	// Secret signs each body (Vigil-Signature); stored sealed, never
	// returned.
	Secret string `json:"secret,omitempty"`
}

// SetWebhookResponse is the reply of PUT /v1/webhooks/{name}.
type SetWebhookResponse struct {
	Webhook
	Created bool `json:"created"`
}

// WebhookTestResult is the reply of POST /v1/webhooks/{name}/test: how
// the receiver answered one test delivery sent at once, outside the
// outbox.
type WebhookTestResult struct {
	DeliveryID string `json:"delivery_id"`
	Delivered  bool   `json:"delivered"`
	Status     int    `json:"status,omitempty"`
	Error      string `json:"error,omitempty"`
	// DurationMS is how long the receiver took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

// Notification is one outbox row and its delivery (GET /v1/notifications).
type Notification struct {
	ID            int64             `json:"id"`
	DeliveryID    string            `json:"delivery_id"`
	Event         state.NotifyEvent `json:"event"`
	Webhook       string            `json:"webhook"`
	DAGID         string            `json:"dag_id"`
	RunID         int64             `json:"run_id"`
	TaskID        string            `json:"task_id,omitempty"`
	TryNumber     int               `json:"try_number,omitempty"`
	SubjectState  string            `json:"subject_state"`
	Reason        string            `json:"reason,omitempty"`
	Message       string            `json:"message,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	State         state.Delivery    `json:"state"`
	Attempts      int               `json:"attempts"`
	NextAttemptAt *time.Time        `json:"next_attempt_at,omitempty"` // pending only
	LastAttemptAt *time.Time        `json:"last_attempt_at,omitempty"`
	LastStatus    int               `json:"last_status,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	FinishedAt    *time.Time        `json:"finished_at,omitempty"`
}

// NotificationList is the reply of GET /v1/notifications, newest first.
type NotificationList struct {
	Notifications []Notification `json:"notifications"`
}

// MaxWebhookURL bounds a webhook's URL (and --external-url), in bytes.
const MaxWebhookURL = 2048

// CheckWebhookURL returns why raw may not be a webhook's URL or the
// server's --external-url, or nil: an absolute http or https URL with a
// host, at most MaxWebhookURL bytes. The error never quotes the URL: it
// may hold a token, as Slack's do.
func CheckWebhookURL(raw string) error {
	if len(raw) > MaxWebhookURL {
		return fmt.Errorf("must be at most %d bytes (got %d)", MaxWebhookURL, len(raw))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an http:// or https:// URL")
	case u.Host == "":
		return errors.New("must name a host")
	}
	return nil
}
