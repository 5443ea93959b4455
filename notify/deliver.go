// Package notify delivers the notification outbox (docs/notifications.md,
// adr/0032): the leader's delivery service posts each due row to its
// webhook outside any transaction and records the result under the
// term's fence, and the sla service raises sla_missed. Both are
// maintenance services started and stopped with the term; a pass is
// bounded (a batch, an HTTP timeout per post, a deadline), so delivery
// never holds up scheduling or reaping, which run as services of their
// own.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/retry"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Service names, for logs and health.
const (
	ServiceDeliver = "notify_deliver"
	ServiceSLA     = "sla"
)

// Defaults (docs/notifications.md "Retries and dead letters").
const (
	DefaultMaxAge        = 24 * time.Hour
	DefaultRetryDelay    = 5 * time.Second
	DefaultRetryMaxDelay = 10 * time.Minute
	DefaultInterval      = time.Second
	DefaultBatch         = 64
	DefaultHTTPTimeout   = 10 * time.Second
	DefaultSLAInterval   = 5 * time.Second
	// maxParallel bounds the webhooks one pass posts to at once.
	maxParallel = 8
	// maxErrorText bounds the error text recorded of a failed attempt, and
	// the part of a receiver's reply it may quote.
	maxErrorText = 300
	replyExcerpt = 120
)

// Config configures the delivery and sla services. Store and Metrics are
// required; zero durations and sizes take the defaults above.
type Config struct {
	Store   *store.Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Secrets opens webhook secrets; nil: a webhook with a secret cannot
	// be delivered to (each attempt fails, naming the missing key).
	Secrets *secrets.Box
	// ExternalURL is the console's address as receivers reach it
	// (--external-url), for each payload's link; empty: no link.
	ExternalURL string
	// MaxAge is how long a notification is retried after it was raised
	// before it is dead-lettered (--notify-max-age); 1m..720h.
	MaxAge time.Duration
	// RetryDelay is the first back-off after a failed attempt; it doubles
	// per attempt up to RetryMaxDelay, each with jitter (half of it
	// random). --notify-retry-delay; 10ms..1h.
	RetryDelay    time.Duration
	RetryMaxDelay time.Duration
	// Interval is the delivery service's poll; a new row wakes it at once
	// through Wake.
	Interval time.Duration
	// Batch bounds the rows one pass posts.
	Batch int
	// HTTPTimeout bounds one post, connect to reply.
	HTTPTimeout time.Duration
	// SLAInterval is the sla service's interval.
	SLAInterval time.Duration
	// Wake, when set, starts a delivery pass early (store.ChanNotify).
	Wake <-chan struct{}
	// Client posts; default a client with HTTPTimeout that follows no
	// redirect (a 3xx is a failed attempt).
	Client *http.Client
}

// Validate fills defaults and checks bounds; errors name the flag.
func (c *Config) Validate() error {
	if c.Store == nil || c.Metrics == nil {
		return errors.New("notify: Store and Metrics are required")
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxAge = cmp.Or(c.MaxAge, DefaultMaxAge)
	c.RetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay)
	c.RetryMaxDelay = cmp.Or(c.RetryMaxDelay, max(DefaultRetryMaxDelay, c.RetryDelay))
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.HTTPTimeout = cmp.Or(c.HTTPTimeout, DefaultHTTPTimeout)
	c.SLAInterval = cmp.Or(c.SLAInterval, DefaultSLAInterval)
	switch {
	case c.MaxAge < time.Minute || c.MaxAge > 720*time.Hour:
		return fmt.Errorf("notify-max-age: %s must be between 1m and 720h", c.MaxAge)
	case c.RetryDelay < 10*time.Millisecond || c.RetryDelay > time.Hour:
		return fmt.Errorf("notify-retry-delay: %s must be between 10ms and 1h", c.RetryDelay)
	case c.RetryMaxDelay < c.RetryDelay:
		return fmt.Errorf("notify retry max delay: %s must not be below notify-retry-delay %s", c.RetryMaxDelay, c.RetryDelay)
	case c.Batch < 1 || c.Batch > 1000:
		return fmt.Errorf("notify batch: %d must be between 1 and 1000", c.Batch)
	}
	if c.ExternalURL != "" {
		if err := protocol.CheckWebhookURL(c.ExternalURL); err != nil {
			return fmt.Errorf("external-url: %w", err)
		}
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.HTTPTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	return nil
}

// Deliverer is the leader's delivery service. It holds nothing between
// passes: every pass reads the due rows from the outbox.
type Deliverer struct {
	cfg Config
	log *slog.Logger
}

// NewDeliverer returns the service for a validated cfg (Config.Validate).
func NewDeliverer(cfg Config) *Deliverer {
	return &Deliverer{cfg: cfg, log: cfg.Logger.With("component", "notify")}
}

// Service runs RunOnce under epoch every Interval, and at once when Wake
// fires. Its deadline covers a whole batch posted to one webhook.
func (d *Deliverer) Service(epoch int64) *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceDeliver, Interval: d.cfg.Interval, Wake: d.cfg.Wake,
		Coalesce: 5 * time.Millisecond, Timeout: max(30*time.Second, 2*d.cfg.HTTPTimeout)},
		func(ctx context.Context) error { _, err := d.RunOnce(ctx, epoch); return err })
}

// Report is what one pass did.
type Report struct {
	Delivered, Failed, Dead int
}

// RunOnce posts the due notifications, a webhook's in order and the
// webhooks side by side, and records every attempt under epoch. After a
// failed post a webhook's later rows wait for the next pass. A fenced
// epoch returns the *store.FencedError (the posts already made will be
// made again by the next leader: at least once).
func (d *Deliverer) RunOnce(ctx context.Context, epoch int64) (Report, error) {
	var rep Report
	if err := d.gauge(ctx); err != nil {
		return rep, err
	}
	due, err := d.cfg.Store.DueNotifications(ctx, d.cfg.Batch)
	if err != nil || len(due) == 0 {
		return rep, err
	}
	var names []string
	byHook := map[string][]store.Notification{}
	for _, n := range due {
		if byHook[n.Webhook] == nil {
			names = append(names, n.Webhook)
		}
		byHook[n.Webhook] = append(byHook[n.Webhook], n)
	}
	hooks, err := d.cfg.Store.GetWebhooks(ctx, names)
	if err != nil {
		return rep, err
	}
	var mu sync.Mutex
	var results []store.DeliveryResult
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallel)
	for _, name := range names {
		hook, ok := hooks[name]
		if !ok {
			continue // deleted meanwhile: DeleteWebhook dead-lettered its rows
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(hook store.Webhook, rows []store.Notification) {
			defer func() { <-sem; wg.Done() }()
			for _, n := range rows {
				res := d.attempt(ctx, hook, n)
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
				if !res.Delivered {
					return
				}
			}
		}(hook, byHook[name])
	}
	wg.Wait()
	dead, err := d.cfg.Store.RecordDeliveries(context.WithoutCancel(ctx), epoch, d.cfg.MaxAge, results)
	if err != nil {
		return rep, err
	}
	for _, r := range results {
		if r.Delivered {
			rep.Delivered++
		} else {
			rep.Failed++
		}
	}
	rep.Failed -= dead
	rep.Dead = dead
	m := d.cfg.Metrics.Notify.Deliveries
	m.WithLabelValues(metrics.DeliveryDelivered).Add(float64(rep.Delivered))
	m.WithLabelValues(metrics.DeliveryFailed).Add(float64(rep.Failed))
	m.WithLabelValues(metrics.DeliveryDead).Add(float64(rep.Dead))
	if dead > 0 {
		d.log.Warn("notifications dead-lettered", "dead", dead, "max_age", d.cfg.MaxAge, "epoch", epoch)
	}
	return rep, nil
}

// gauge sets the age of the oldest pending notification.
func (d *Deliverer) gauge(ctx context.Context) error {
	age, _, err := d.cfg.Store.OldestPendingAge(ctx)
	if err != nil {
		return err
	}
	d.cfg.Metrics.Notify.OldestPending.Set(age.Seconds())
	return nil
}

// attempt posts n to hook once and returns the result to record, with
// the back-off a failure waits (exponential from RetryDelay, half of it
// random, so receivers coming back are not hit by every leader at once).
func (d *Deliverer) attempt(ctx context.Context, hook store.Webhook, n store.Notification) store.DeliveryResult {
	res := store.DeliveryResult{ID: n.ID}
	res.Status, res.Delivered, res.Error = d.post(ctx, hook, Payload(n, d.cfg.ExternalURL))
	if !res.Delivered {
		_, delay := retry.Policy{Retries: n.Attempts + 1, Delay: d.cfg.RetryDelay, Exponential: true,
			MaxDelay: d.cfg.RetryMaxDelay}.Next(n.Attempts + 1)
		res.Retry = delay/2 + rand.N(delay/2+1)
		d.log.Info("notification delivery failed", "id", n.ID, "delivery_id", n.DeliveryID, "webhook", hook.Name,
			"event", n.Event, "attempt", n.Attempts+1, "status", res.Status, "err", res.Error, "retry_in", res.Retry)
	}
	return res
}

// Post sends one payload to hook, outside the outbox (the test route
// uses it too), and reports the receiver's status, whether it answered
// 2xx, and otherwise why not: bounded text that holds neither the URL
// (which may carry a token), the secret, nor more than a short excerpt
// of the reply.
func (d *Deliverer) post(ctx context.Context, hook store.Webhook, p protocol.WebhookPayload) (status int, ok bool, why string) {
	body, err := Body(p, hook.Format)
	if err != nil {
		return 0, false, "encode: " + err.Error()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, false, "the webhook's URL does not make a request"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "vigil-webhook")
	req.Header.Set(protocol.HeaderDeliveryID, p.DeliveryID)
	req.Header.Set(protocol.HeaderEvent, string(p.Event))
	if hook.SecretVersion > 0 {
		if d.cfg.Secrets == nil {
			return 0, false, "the webhook has a secret and this server has no --secrets-key-file to open it"
		}
		secret, err := d.cfg.Secrets.Open(store.WebhookSecretName(hook.Name), hook.SecretVersion, hook.SealedSecret)
		if err != nil {
			return 0, false, "the webhook's secret " + err.Error()
		}
		req.Header.Set(protocol.HeaderSignature, Sign(secret, body))
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return 0, false, clean(transportError(err), hook.URL)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, replyExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, true, ""
	}
	why = fmt.Sprintf("HTTP %d", resp.StatusCode)
	if ex := printable(reply); ex != "" {
		why += ": " + ex
	}
	return resp.StatusCode, false, clean(why, hook.URL)
}

// Test posts a test payload to hook now, outside the outbox, and
// reports how the receiver answered (`vigil webhooks test`).
func (d *Deliverer) Test(ctx context.Context, hook store.Webhook, deliveryID string) protocol.WebhookTestResult {
	began := time.Now()
	p := protocol.WebhookPayload{DeliveryID: deliveryID, Event: state.NotifyRunFailed, DAGID: "vigil-webhook-test",
		State: string(state.RunFailed), Message: "a test delivery from vigil webhooks test", OccurredAt: began.UTC(), Test: true}
	status, ok, why := d.post(ctx, hook, p)
	return protocol.WebhookTestResult{DeliveryID: deliveryID, Delivered: ok, Status: status, Error: why,
		DurationMS: time.Since(began).Milliseconds()}
}

// transportError is err without the *url.Error wrapper, which quotes the
// URL.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "timed out"
		}
		return ue.Err.Error()
	}
	return err.Error()
}

// clean removes the URL from s and bounds it.
func clean(s, rawURL string) string {
	if rawURL != "" {
		s = strings.ReplaceAll(s, rawURL, "<webhook url>")
	}
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// printable is b as one line of printable text: invalid UTF-8 (a
// binary reply, or a rune the excerpt cut) dropped, control characters
// as spaces.
func printable(b []byte) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.ToValidUTF8(string(b), "")))
}
