package state

// NotifyEvent is an event a DAG's notify list may send to a webhook
// (docs/notifications.md). The store's triggers write one outbox row per
// matching webhook in the transaction of the state change that causes it.
type NotifyEvent string

// Notification events. Each comment says which state change raises it.
const (
	// NotifyRunFailed: a run ended failed or cancelled (an operator's
	// cancel, its run timeout, an orphaned run); the payload's state says
	// which.
	NotifyRunFailed NotifyEvent = "run_failed"
	// NotifyRunSucceeded: a run ended success.
	NotifyRunSucceeded NotifyEvent = "run_succeeded"
	// NotifyTaskFailed: a try of a TI failed, whatever ended it: a TI
	// left scheduled, queued, running or success for failed or
	// up_for_retry (so each failed try, retried or not, and an operator's
	// mark failed). A TI failed from none (an orphaned run's untried TIs)
	// had no try and raises none: its run's run_failed carries the reason.
	NotifyTaskFailed NotifyEvent = "task_failed"
	// NotifyTaskRetried: a failed try has budget left (the TI entered
	// up_for_retry); raised beside that try's task_failed.
	NotifyTaskRetried NotifyEvent = "task_retried"
	// NotifySLAMissed: a run with an sla was not finished by its SLA
	// deadline; raised once per run by the leader's sla service.
	NotifySLAMissed NotifyEvent = "sla_missed"
)

// NotifyEvents lists every notification event.
func NotifyEvents() []NotifyEvent {
	return []NotifyEvent{NotifyRunFailed, NotifyRunSucceeded, NotifyTaskFailed, NotifyTaskRetried, NotifySLAMissed}
}

// Delivery is the state of one notification's delivery to its webhook.
type Delivery string

// Delivery states.
const (
	// DeliveryPending: not yet acknowledged by the receiver (any 2xx);
	// the leader's delivery service retries it with back-off.
	DeliveryPending Delivery = "pending"
	// DeliveryDelivered: terminal; the receiver answered 2xx.
	DeliveryDelivered Delivery = "delivered"
	// DeliveryDead: terminal; still failing at --notify-max-age after it
	// was raised, or its webhook was deleted. Kept and counted for an
	// operator to see.
	DeliveryDead Delivery = "dead"
)

// Deliveries lists every delivery state.
func Deliveries() []Delivery {
	return []Delivery{DeliveryPending, DeliveryDelivered, DeliveryDead}
}

// Terminal reports whether the delivery service is done with it.
func (d Delivery) Terminal() bool { return d == DeliveryDelivered || d == DeliveryDead }

// WebhookFormat is the body shape a webhook receives.
type WebhookFormat string

// Webhook formats.
const (
	// WebhookJSON posts the notification as JSON (docs/notifications.md).
	WebhookJSON WebhookFormat = "json"
	// WebhookSlack posts a Slack-compatible {"text": "..."}.
	WebhookSlack WebhookFormat = "slack"
)

// WebhookFormats lists every webhook format.
func WebhookFormats() []WebhookFormat { return []WebhookFormat{WebhookJSON, WebhookSlack} }
