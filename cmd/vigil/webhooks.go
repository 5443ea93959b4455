package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/notify"
	"github.com/vigil-sched/vigil/state"
)

// `vigil webhooks set | list | delete | test` and `vigil notifications
// list` (docs/notifications.md), and the server flags of delivery.

// notifyOpts are the server's delivery flags.
type notifyOpts struct {
	externalURL string
	maxAge      time.Duration
	retryDelay  time.Duration
}

// addNotifyFlags adds --external-url, --notify-max-age and
// --notify-retry-delay.
func addNotifyFlags(f *pflag.FlagSet, o *notifyOpts) {
	f.StringVar(&o.externalURL, "external-url", "", "the console's address as webhook receivers reach it, for the run link of each notification (http:// or https://); empty: no link")
	f.DurationVar(&o.maxAge, "notify-max-age", notify.DefaultMaxAge, "retry a notification this long after it was raised, then dead-letter it (1m..720h)")
	f.DurationVar(&o.retryDelay, "notify-retry-delay", notify.DefaultRetryDelay, "first back-off after a failed delivery; doubles per attempt up to 10m, with jitter (10ms..1h)")
}

// validate checks the flags; errors name the flag (exit 2).
func (o *notifyOpts) validate() error {
	if o.externalURL != "" {
		if err := protocol.CheckWebhookURL(o.externalURL); err != nil {
			return usageError("--external-url: %v", err)
		}
	}
	switch {
	case o.maxAge < time.Minute || o.maxAge > 720*time.Hour:
		return usageError("--notify-max-age: %s must be between 1m and 720h", o.maxAge)
	case o.retryDelay < 10*time.Millisecond || o.retryDelay > time.Hour:
		return usageError("--notify-retry-delay: %s must be between 10ms and 1h", o.retryDelay)
	}
	return nil
}

// config is the control plane's notify.Config of the flags.
func (o *notifyOpts) config() notify.Config {
	return notify.Config{ExternalURL: o.externalURL, MaxAge: o.maxAge, RetryDelay: o.retryDelay}
}

// newWebhooksCmd is `vigil webhooks set | list | delete | test`.
func newWebhooksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "webhooks", Short: "Manage the webhooks a DAG's notify list sends events to"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(newWebhooksSetCmd(o), newWebhooksListCmd(o), newWebhooksDeleteCmd(o), newWebhooksTestCmd(o))
	return cmd
}

// checkWebhookName refuses a bad NAME argument before any request.
func checkWebhookName(name string) error {
	if !dag.ValidWebhookName(name) {
		return usageError("NAME %q: %s", name, dag.WebhookNameRule)
	}
	return nil
}

func webhookPath(name string) string { return "/v1/webhooks/" + url.PathEscape(name) }

func newWebhooksSetCmd(o *clientOpts) *cobra.Command {
	var hookURL, secretFile, format string
	set := &cobra.Command{
		Use:   "set NAME --url URL [--secret-file F] [--format json|slack]",
		Short: "Create or replace a webhook (the secret is never printed)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkWebhookName(name); err != nil {
				return err
			}
			if err := protocol.CheckWebhookURL(hookURL); err != nil {
				return usageError("--url: %v", err)
			}
			if !slices.Contains(state.Strings(state.WebhookFormats()), format) {
				return usageError("--format: %q must be one of %s", format, strings.Join(state.Strings(state.WebhookFormats()), ", "))
			}
			req := protocol.SetWebhookRequest{URL: hookURL, Format: state.WebhookFormat(format)}
			if secretFile != "" {
				secret, err := readSecretValue(nil, secretFile)
				if err != nil {
					return err
				}
				req.Secret = strings.TrimRight(secret, "\r\n")
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var resp protocol.SetWebhookResponse
			if err := c.Do(cmd.Context(), http.MethodPut, webhookPath(name), req, &resp); err != nil {
				return err
			}
			what := "updated"
			if resp.Created {
				what = "created"
			}
			return o.render(cmd.OutOrStdout(), view{
				api: resp,
				table: func(w io.Writer, _ bool) error {
					_, err := fmt.Fprintf(w, "webhook %s %s (format %s, signed: %t)\n", resp.Name, what, resp.Format, resp.HasSecret)
					return err
				},
				names: func() []string { return []string{resp.Name} },
			})
		},
	}
	f := set.Flags()
	f.StringVar(&hookURL, "url", "", "where deliveries are posted: an http:// or https:// URL (required)")
	f.StringVar(&secretFile, "secret-file", "", "file holding the secret that signs each body (Vigil-Signature); trailing newlines dropped; without it the webhook has no secret")
	f.StringVar(&format, "format", string(state.WebhookJSON), "body shape: json (the payload) or slack ({\"text\": ...})")
	_ = set.MarkFlagRequired("url")
	return set
}

func newWebhooksListCmd(o *clientOpts) *cobra.Command {
	return listCmd(o, "List the webhooks, never their secrets", "/v1/webhooks", func(list *protocol.WebhookList) view {
		if list.Webhooks == nil {
			list.Webhooks = []protocol.Webhook{}
		}
		return view{
			api: list,
			table: func(w io.Writer, _ bool) error {
				tw := newTable(w)
				tableRow(tw, "NAME", "FORMAT", "SIGNED", "URL", "UPDATED")
				for _, h := range list.Webhooks {
					tableRow(tw, h.Name, string(h.Format), strconv.FormatBool(h.HasSecret), h.URL, fmtTime(h.UpdatedAt))
				}
				return tw.Flush()
			},
			names: namesOf(list.Webhooks, func(h protocol.Webhook) string { return h.Name }),
		}
	})
}

func newWebhooksDeleteCmd(o *clientOpts) *cobra.Command {
	return named{"webhook", checkWebhookName, webhookPath}.deleteCmd(o, "Delete a webhook no DAG names; its pending deliveries become dead")
}

func newWebhooksTestCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "test NAME",
		Short: "Post a test payload to a webhook now and show how it answered (exit 1 unless 2xx)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkWebhookName(name); err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var res protocol.WebhookTestResult
			if err := c.Do(cmd.Context(), http.MethodPost, webhookPath(name)+"/test", nil, &res); err != nil {
				return err
			}
			err = o.render(cmd.OutOrStdout(), view{
				api: res,
				table: func(w io.Writer, _ bool) error {
					if res.Delivered {
						_, err := fmt.Fprintf(w, "webhook %s answered HTTP %d in %dms (delivery %s)\n", name, res.Status, res.DurationMS, res.DeliveryID)
						return err
					}
					_, err := fmt.Fprintf(w, "webhook %s failed after %dms: %s\n", name, res.DurationMS, res.Error)
					return err
				},
				names: func() []string { return []string{res.DeliveryID} },
			})
			if err == nil && !res.Delivered {
				return fmt.Errorf("webhook %s: the test delivery failed: %s", name, res.Error)
			}
			return err
		},
	}
}

// newNotificationsCmd is `vigil notifications list`.
func newNotificationsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "notifications", Short: "Show the notification deliveries of the outbox"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	var stateFlag string
	var runID int64
	var limit int
	list := &cobra.Command{
		Use:   "list [--state pending|delivered|dead] [--run ID]",
		Short: "List deliveries newest first, with their attempts and last error",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stateFlag != "" && !slices.Contains(state.Strings(state.Deliveries()), stateFlag) {
				return usageError("--state: %q must be one of %s", stateFlag, strings.Join(state.Strings(state.Deliveries()), ", "))
			}
			if limit < 1 || limit > 1000 {
				return usageError("--limit: %d must be between 1 and 1000", limit)
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if stateFlag != "" {
				q.Set("state", stateFlag)
			}
			if runID > 0 {
				q.Set("run_id", strconv.FormatInt(runID, 10))
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var res protocol.NotificationList
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/notifications?"+q.Encode(), nil, &res); err != nil {
				return err
			}
			if res.Notifications == nil {
				res.Notifications = []protocol.Notification{}
			}
			return o.render(cmd.OutOrStdout(), view{
				api:   res,
				table: func(w io.Writer, wide bool) error { return notificationTable(w, res.Notifications, wide) },
				names: namesOf(res.Notifications, func(n protocol.Notification) string { return n.DeliveryID }),
			})
		},
	}
	f := list.Flags()
	f.StringVar(&stateFlag, "state", "", "only deliveries in this state: pending, delivered or dead")
	f.Int64Var(&runID, "run", 0, "only the deliveries of this run")
	f.IntVar(&limit, "limit", 100, "at most this many (1..1000)")
	cmd.AddCommand(list)
	return cmd
}

func notificationTable(w io.Writer, ns []protocol.Notification, wide bool) error {
	tw := newTable(w)
	head := []string{"ID", "EVENT", "WEBHOOK", "RUN", "TASK", "STATE", "ATTEMPTS", "CREATED", "LAST ERROR"}
	if wide {
		head = append(head, "DELIVERY ID", "NEXT ATTEMPT", "FINISHED")
	}
	tableRow(tw, head...)
	for _, n := range ns {
		task := "-"
		if n.TaskID != "" {
			task = fmt.Sprintf("%s#%d", n.TaskID, n.TryNumber)
		}
		lastErr := n.LastError
		if lastErr == "" {
			lastErr = "-"
		}
		row := []string{strconv.FormatInt(n.ID, 10), string(n.Event), n.Webhook, fmt.Sprintf("%s/%d", n.DAGID, n.RunID), task,
			string(n.State), strconv.Itoa(n.Attempts), fmtTime(n.CreatedAt), strings.Join(strings.Fields(lastErr), " ")}
		if wide {
			row = append(row, n.DeliveryID, fmtTimePtr(n.NextAttemptAt), fmtTimePtr(n.FinishedAt))
		}
		tableRow(tw, row...)
	}
	return tw.Flush()
}
