package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
)

// `vigil whoami` and `vigil audit list`: who the CLI's token is, and the
// audit log (docs/security.md "Identities and roles", "The audit log").

// newWhoamiCmd is `vigil whoami`: GET /v1/session with the client's token.
func newWhoamiCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the identity of your token: its name, its role and how it authenticated",
		Args:  noArgs,
	}
	o := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := o.newClient()
		if err != nil {
			return err
		}
		var who protocol.Session
		if err := c.Do(cmd.Context(), http.MethodGet, "/v1/session", nil, &who); err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), view{
			api: who,
			table: func(w io.Writer, _ bool) error {
				tw := newTable(w)
				tableRow(tw, "NAME", "ROLE", "AUTH")
				tableRow(tw, who.Name, who.Role, who.Auth)
				return tw.Flush()
			},
			names: func() []string { return []string{who.Name} },
		})
	}
	return cmd
}

// newAuditCmd is `vigil audit list`.
func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read the audit log: every state-changing call, allowed or refused (admin role)"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	var actor, target, since, before string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the audit log, newest first",
		Long: `List the audit log, newest first: who (actor, role, how authenticated),
when (the database clock), what (route and target), the request id, the
client's address and the result. Needs the admin role. A page holds
--limit rows; the last line says how to read on (--before).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"actor": actor, "target": target, "since": since, "before": before} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if since != "" {
				if _, err := time.ParseDuration(since); err != nil {
					if _, err := time.Parse(time.RFC3339, since); err != nil {
						return usageError("--since %q: want a Go duration back from now (24h) or an RFC 3339 time (2026-11-27T15:00:00Z)", since)
					}
				}
			}
			if limit < 1 || limit > protocol.AuditPageMax {
				return usageError("--limit %d: must be in 1..%d", limit, protocol.AuditPageMax)
			}
			q.Set("limit", strconv.Itoa(limit))
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var page protocol.AuditList
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/audit?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			return o.render(cmd.OutOrStdout(), view{
				api:   page,
				table: func(w io.Writer, wide bool) error { return printAudit(w, page, wide) },
				names: namesOf(page.Records, func(r protocol.AuditRecord) string { return strconv.FormatInt(r.ID, 10) }),
			})
		},
	}
	f := list.Flags()
	f.StringVar(&actor, "actor", "", "only this identity's calls (anonymous: callers that proved none)")
	f.StringVar(&target, "target", "", "only calls whose target starts with this (the path below /v1/: runs/42, dags/etl, secrets)")
	f.StringVar(&since, "since", "", "only calls since: a Go duration back from now (24h) or an RFC 3339 time")
	f.StringVar(&before, "before", "", "only rows with an id below this (the cursor the previous page printed)")
	f.IntVar(&limit, "limit", protocol.AuditPageDefault, fmt.Sprintf("rows per page (1..%d)", protocol.AuditPageMax))
	cmd.AddCommand(list)
	return cmd
}

// printAudit prints a page of the audit log as a table; wide adds the
// request id, the client and the message.
func printAudit(w io.Writer, page protocol.AuditList, wide bool) error {
	tw := newTable(w)
	head := []string{"ID", "AT", "ACTOR", "ROLE", "ROUTE", "TARGET", "RESULT"}
	if wide {
		head = append(head, "AUTH", "REQUEST", "CLIENT", "MESSAGE")
	}
	tableRow(tw, head...)
	for _, r := range page.Records {
		result := r.Result
		if r.Status != 0 {
			result += " " + strconv.Itoa(r.Status)
		}
		row := []string{strconv.FormatInt(r.ID, 10), fmtTime(r.At), r.Actor, tableCell(r.Role), r.Route, tableCell(r.Target), result}
		if wide {
			row = append(row, tableCell(r.Auth), tableCell(r.RequestID), tableCell(r.Client), tableCell(r.Message))
		}
		tableRow(tw, row...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != nil {
		_, err := fmt.Fprintf(w, "more: vigil audit list --before %d\n", *page.NextCursor)
		return err
	}
	return nil
}
