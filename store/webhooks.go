package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
)

// Webhooks (docs/notifications.md): a named receiver of notifications.
// Its secret, like a named secret, reaches the store only sealed (package
// secrets) and leaves it only sealed, for the delivery service and the
// test delivery to open; nothing the store returns to the API holds it.

// MaxWebhooks bounds how many webhooks one cluster holds, which keeps
// `webhooks list` a bounded reply without paging.
const MaxWebhooks = 200

// WebhookSecretName is the name a webhook's secret is sealed under
// (secrets.Box.Seal): "webhook/NAME", which no named secret can have
// ('/' is outside secrets.NameRule), so a sealed value copied between
// the two tables does not open.
func WebhookSecretName(name string) string { return "webhook/" + name }

// WebhookInfo is one webhook as the API shows it: never its secret, only
// whether it has one.
type WebhookInfo struct {
	Name      string
	URL       string
	Format    state.WebhookFormat
	HasSecret bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Webhook is one webhook as the delivery service reads it: its secret
// still sealed, under WebhookSecretName(Name) and SecretVersion (0: none).
type Webhook struct {
	WebhookInfo
	SecretVersion int64
	SealedSecret  []byte
}

// WebhookLimitError refuses a new webhook when the cluster holds its maximum.
type WebhookLimitError struct{ Max int }

func (e *WebhookLimitError) Error() string {
	return fmt.Sprintf("webhooks: the cluster holds its maximum of %d webhooks; delete one first", e.Max)
}

// WebhookInUseError refuses deleting a webhook that DAGs' notify lists name.
type WebhookInUseError struct {
	Name string
	DAGs []string
}

func (e *WebhookInUseError) Error() string {
	return fmt.Sprintf("webhook %s: the notify list of dag %s names it; remove it from those DAGs and apply them first",
		e.Name, strings.Join(e.DAGs, ", "))
}

// SetWebhook creates or replaces the webhook name: its url and format,
// and its secret when seal is not nil (seal is called with the secret
// version being written and returns the sealed secret for it); a nil seal
// stores the webhook without a secret. A new name is refused with
// *WebhookLimitError when MaxWebhooks exist. created reports a new name.
func (s *Store) SetWebhook(ctx context.Context, name, url string, format state.WebhookFormat,
	seal func(version int64) ([]byte, error)) (info WebhookInfo, created bool, err error) {
	err = s.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE webhooks IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var version int64
		var count int
		var exists bool
		if err := tx.QueryRow(ctx, `
			SELECT coalesce((SELECT secret_version FROM webhooks WHERE name = $1), 0),
			       EXISTS (SELECT 1 FROM webhooks WHERE name = $1), (SELECT count(*) FROM webhooks)`,
			name).Scan(&version, &exists, &count); err != nil {
			return err
		}
		created = !exists
		if created && count >= MaxWebhooks {
			return &WebhookLimitError{Max: MaxWebhooks}
		}
		var sealed []byte
		newVersion := int64(0)
		if seal != nil {
			newVersion = version + 1
			var err error
			if sealed, err = seal(newVersion); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `
			INSERT INTO webhooks (name, url, format, secret_version, sealed_secret) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, format = EXCLUDED.format,
			    secret_version = EXCLUDED.secret_version, sealed_secret = EXCLUDED.sealed_secret, updated_at = now()
			RETURNING name, url, format, secret_version > 0, created_at, updated_at`,
			name, url, string(format), newVersion, sealed).
			Scan(&info.Name, &info.URL, &info.Format, &info.HasSecret, &info.CreatedAt, &info.UpdatedAt)
	})
	if err != nil {
		return WebhookInfo{}, false, fmt.Errorf("set webhook %s: %w", name, err)
	}
	return info, created, nil
}

// ListWebhooks returns every webhook by name, without secrets; at most
// MaxWebhooks.
func (s *Store) ListWebhooks(ctx context.Context) ([]WebhookInfo, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT name, url, format, secret_version > 0, created_at, updated_at FROM webhooks ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookInfo, error) {
		var i WebhookInfo
		err := r.Scan(&i.Name, &i.URL, &i.Format, &i.HasSecret, &i.CreatedAt, &i.UpdatedAt)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// GetWebhooks returns the named webhooks with their sealed secrets, by
// name; a name without a webhook is left out.
func (s *Store) GetWebhooks(ctx context.Context, names []string) (map[string]Webhook, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT name, url, format, secret_version, sealed_secret, created_at, updated_at
		  FROM webhooks WHERE name = ANY ($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("read webhooks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Webhook, error) {
		var w Webhook
		err := r.Scan(&w.Name, &w.URL, &w.Format, &w.SecretVersion, &w.SealedSecret, &w.CreatedAt, &w.UpdatedAt)
		w.HasSecret = w.SecretVersion > 0
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("read webhooks: %w", err)
	}
	out := make(map[string]Webhook, len(list))
	for _, w := range list {
		out[w.Name] = w
	}
	return out, nil
}

// DeleteWebhook deletes the webhook name. It is refused with
// *WebhookInUseError while a DAG's notify list names it. Its pending
// deliveries become dead in the same transaction ("webhook deleted"), so
// none waits for a receiver that no longer exists. Errors: ErrNotFound.
func (s *Store) DeleteWebhook(ctx context.Context, name string) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE webhooks IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT DISTINCT dag_id FROM dag_notify WHERE webhook = $1 ORDER BY dag_id LIMIT 20`, name)
		if err != nil {
			return err
		}
		dags, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(dags) > 0 {
			return &WebhookInUseError{Name: name, DAGs: dags}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM webhooks WHERE name = $1`, name)
		if err == nil && tag.RowsAffected() == 0 {
			return fmt.Errorf("webhook %s: %w", name, ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE notifications SET state = 'dead', finished_at = now(), last_error = 'webhook deleted'
			 WHERE webhook = $1 AND state = 'pending'`, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	return nil
}

// MissingWebhooksError refuses a DAG whose notify list names webhooks
// that do not exist: each reference with its field.
type MissingWebhooksError struct {
	DAGID string
	// Refs are the notify entries' fields ("notify[0].webhook") and the
	// names they hold.
	Refs []WebhookRef
}

// WebhookRef is one notify entry's webhook reference.
type WebhookRef struct {
	Field   string
	Webhook string
}

func (e *MissingWebhooksError) Error() string {
	lines := make([]string, len(e.Refs))
	for i, r := range e.Refs {
		lines[i] = fmt.Sprintf("dag %q: %s: no such webhook %q (create it with `vigil webhooks set %s --url URL`)",
			e.DAGID, r.Field, r.Webhook, r.Webhook)
	}
	return strings.Join(lines, "\n")
}

// syncNotify checks that every webhook spec's notify list names exists,
// locking those rows (FOR KEY SHARE) until tx ends so no delete slips in,
// and rewrites the DAG's dag_notify rows: *MissingWebhooksError otherwise.
func syncNotify(ctx context.Context, tx pgx.Tx, spec *dag.Spec) error {
	names := spec.Webhooks()
	if len(names) > 0 {
		rows, err := tx.Query(ctx, `SELECT name FROM webhooks WHERE name = ANY ($1) FOR KEY SHARE`, names)
		if err != nil {
			return fmt.Errorf("apply dag %q: check webhooks: %w", spec.DAGID, err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("apply dag %q: check webhooks: %w", spec.DAGID, err)
		}
		var missing []WebhookRef
		for i, r := range spec.Notify {
			if !slices.Contains(found, r.Webhook) {
				missing = append(missing, WebhookRef{Field: fmt.Sprintf("notify[%d].webhook", i), Webhook: r.Webhook})
			}
		}
		if len(missing) > 0 {
			return &MissingWebhooksError{DAGID: spec.DAGID, Refs: missing}
		}
	}
	var events, hooks []string
	for _, r := range spec.Notify {
		for _, e := range r.On {
			events, hooks = append(events, string(e)), append(hooks, r.Webhook)
		}
	}
	_, err := tx.Exec(ctx, `DELETE FROM dag_notify WHERE dag_id = $1`, spec.DAGID)
	if err == nil && len(events) > 0 {
		_, err = tx.Exec(ctx, `
			INSERT INTO dag_notify (dag_id, event, webhook)
			SELECT DISTINCT $1, e, w FROM unnest($2::text[], $3::text[]) AS x (e, w)`, spec.DAGID, events, hooks)
	}
	if err != nil {
		return fmt.Errorf("apply dag %q: notify list: %w", spec.DAGID, err)
	}
	return nil
}

// IsMissingWebhooks reports whether err is (or wraps) a *MissingWebhooksError.
func IsMissingWebhooks(err error) bool {
	var m *MissingWebhooksError
	return errors.As(err, &m)
}
