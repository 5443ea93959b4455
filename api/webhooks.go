package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Webhooks and notifications (docs/notifications.md). A webhook's secret
// goes into the store only sealed by Config.Secrets and never comes back
// in a reply; handlers log a webhook's name and format, never its URL
// (Slack's carry a token) or secret.

// webhooksAccess is who may manage webhooks: the admin role
// (docs/security.md "Identities and roles").
const webhooksAccess = AccessAdmin

// maxWebhookBody bounds a PUT /v1/webhooks/{name} body: the URL, the
// largest secret with every byte JSON-escaped, and the object around it.
const maxWebhookBody = protocol.MaxWebhookURL + 6*secrets.MaxValueBytes + 1024

// WebhookTester posts one test payload to a webhook now, outside the
// outbox, and reports how the receiver answered (notify.Deliverer).
type WebhookTester interface {
	Test(ctx context.Context, hook store.Webhook, deliveryID string) protocol.WebhookTestResult
}

// webhookName reads and checks the {name} path parameter.
func webhookName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if !dag.ValidWebhookName(name) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("path parameter name: %q %s", truncateForError(name), dag.WebhookNameRule))
		return "", false
	}
	return name, true
}

func toWebhook(i store.WebhookInfo) protocol.Webhook {
	return protocol.Webhook{Name: i.Name, URL: i.URL, Format: i.Format, HasSecret: i.HasSecret,
		CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt}
}

// listWebhooks answers GET /v1/webhooks.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Store.ListWebhooks(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, protocol.WebhookList{Webhooks: convertSlice(list, toWebhook)})
}

// setWebhook answers PUT /v1/webhooks/{name}: the whole webhook, its
// secret sealed with the server's key.
func (s *Server) setWebhook(w http.ResponseWriter, r *http.Request) {
	name, ok := webhookName(w, r)
	if !ok {
		return
	}
	var req protocol.SetWebhookRequest
	if !decodeFrom(w, http.MaxBytesReader(w, r.Body, maxWebhookBody), &req) {
		return
	}
	if err := protocol.CheckWebhookURL(req.URL); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "url: "+err.Error())
		return
	}
	if req.Format == "" {
		req.Format = state.WebhookJSON
	}
	if !slices.Contains(state.WebhookFormats(), req.Format) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("format: %q must be one of %s",
			truncateForError(string(req.Format)), strings.Join(state.Strings(state.WebhookFormats()), ", ")))
		return
	}
	var seal func(int64) ([]byte, error)
	if req.Secret != "" {
		if err := secrets.CheckValue([]byte(req.Secret)); err != nil {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "secret: "+err.Error())
			return
		}
		if !s.secretsOn(w) {
			return
		}
		box := s.cfg.Secrets
		seal = func(version int64) ([]byte, error) {
			return box.Seal(store.WebhookSecretName(name), version, []byte(req.Secret))
		}
	}
	info, created, err := s.cfg.Store.SetWebhook(r.Context(), name, req.URL, req.Format, seal)
	var limit *store.WebhookLimitError
	switch {
	case errors.As(err, &limit):
		writeError(w, http.StatusConflict, protocol.CodeConflict, limit.Error())
		return
	case err != nil:
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("webhook set", "name", name, "format", info.Format, "secret", info.HasSecret, "created", created, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, protocol.SetWebhookResponse{Webhook: toWebhook(info), Created: created})
}

// deleteWebhook answers DELETE /v1/webhooks/{name}: 409 while a DAG's
// notify list names it.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	name, ok := webhookName(w, r)
	if !ok {
		return
	}
	err := s.cfg.Store.DeleteWebhook(r.Context(), name)
	var inUse *store.WebhookInUseError
	switch {
	case errors.As(err, &inUse):
		writeError(w, http.StatusConflict, protocol.CodeConflict, inUse.Error())
		return
	case err != nil:
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("webhook deleted", "name", name, "actor", actorOf(r))
	w.WriteHeader(http.StatusNoContent)
}

// testWebhook answers POST /v1/webhooks/{name}/test: one test payload
// posted now, outside the outbox, and how the receiver answered.
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request) {
	name, ok := webhookName(w, r)
	if !ok {
		return
	}
	if s.cfg.Notify == nil {
		writeError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "this server does not deliver notifications")
		return
	}
	hooks, err := s.cfg.Store.GetWebhooks(r.Context(), []string{name})
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	hook, ok := hooks[name]
	if !ok {
		writeError(w, http.StatusNotFound, protocol.CodeNotFound, fmt.Sprintf("webhook %s: not found", name))
		return
	}
	res := s.cfg.Notify.Test(r.Context(), hook, rand.Text())
	s.log.Info("webhook tested", "name", name, "delivered", res.Delivered, "status", res.Status, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, res)
}

// listNotifications answers GET /v1/notifications[?state=&run_id=&limit=]:
// deliveries newest first.
func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) {
	f := store.NotificationFilter{State: state.Delivery(r.URL.Query().Get("state"))}
	if f.State != "" && !slices.Contains(state.Deliveries(), f.State) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("query parameter state: %q must be one of %s",
			truncateForError(string(f.State)), strings.Join(state.Strings(state.Deliveries()), ", ")))
		return
	}
	var ok bool
	if f.RunID, ok = queryInt(w, r, "run_id", 1<<62); !ok {
		return
	}
	if f.Limit, ok = queryLimit(w, r, "limit", 100, 1000); !ok {
		return
	}
	list, err := s.cfg.Store.ListNotifications(r.Context(), f)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, protocol.NotificationList{Notifications: convertSlice(list, toNotification)})
}

func toNotification(n store.Notification) protocol.Notification {
	out := protocol.Notification{ID: n.ID, DeliveryID: n.DeliveryID, Event: n.Event, Webhook: n.Webhook, DAGID: n.DAGID,
		RunID: n.RunID, TaskID: n.TaskID, TryNumber: n.TryNumber, SubjectState: n.SubjectState, Reason: n.Reason,
		Message: n.Message, CreatedAt: n.CreatedAt, State: n.State, Attempts: n.Attempts, LastAttemptAt: n.LastAttemptAt,
		LastStatus: n.LastStatus, LastError: n.LastError, FinishedAt: n.FinishedAt}
	if n.State == state.DeliveryPending {
		next := n.NextAttemptAt
		out.NextAttemptAt = &next
	}
	return out
}
