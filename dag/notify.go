package dag

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/state"
)

// Limits of a DAG's notify list and SLA (docs/notifications.md).
const (
	// MaxNotifyRules bounds the entries of notify.
	MaxNotifyRules = 16
	// SLALimit is the longest sla: a week, like the run timeout's order of
	// magnitude; a deadline further out is a report, not an alert.
	SLALimit = 7 * 24 * time.Hour
)

// NotifyRule sends the events On raises on this DAG's runs to the webhook
// named Webhook (`vigil webhooks set`). Whether the webhook exists is the
// server's check at apply.
type NotifyRule struct {
	// On lists the events, at least one, each once.
	On []state.NotifyEvent `yaml:"on" json:"on"`
	// Webhook names a webhook; see ValidID for its shape.
	Webhook string `yaml:"webhook" json:"webhook"`
}

// WebhookNameRule is the shape of a webhook name, as errors quote it.
const WebhookNameRule = idRule

// ValidWebhookName reports whether name follows WebhookNameRule.
func ValidWebhookName(name string) bool { return ValidID(name) }

// Webhooks returns the distinct webhook names the notify list names, sorted.
func (s *Spec) Webhooks() []string {
	var out []string
	for _, r := range s.Notify {
		if !slices.Contains(out, r.Webhook) {
			out = append(out, r.Webhook)
		}
	}
	slices.Sort(out)
	return out
}

// notify checks notify and sla.
func (v *validator) notify(s *Spec) {
	if s.SLA < 0 || s.SLA.D() > SLALimit {
		v.dagf("sla", "must be positive and at most %s, or omitted for none; got %s", humanLimit(SLALimit), s.SLA)
	}
	if len(s.Notify) > MaxNotifyRules {
		v.dagf("notify", "at most %d entries are allowed (got %d)", MaxNotifyRules, len(s.Notify))
	}
	known := state.Strings(state.NotifyEvents())
	for i, r := range s.Notify {
		field := fmt.Sprintf("notify[%d]", i)
		if !ValidWebhookName(r.Webhook) {
			v.dagf(field+".webhook", "%q %s", r.Webhook, WebhookNameRule)
		}
		if len(r.On) == 0 {
			v.dagf(field+".on", "at least one event is required (%s)", strings.Join(known, ", "))
		}
		for j, e := range r.On {
			switch {
			case !slices.Contains(known, string(e)):
				v.dagf(fmt.Sprintf("%s.on[%d]", field, j), "unknown event %q; the events are %s", e, strings.Join(known, ", "))
			case slices.Index(r.On, e) < j:
				v.dagf(fmt.Sprintf("%s.on[%d]", field, j), "event %q is listed twice", e)
			}
		}
	}
}
