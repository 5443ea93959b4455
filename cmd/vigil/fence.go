package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"

	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/store"
)

// fenceAuditShown is how many audit entries `vigil fence show` lists.
const fenceAuditShown = 10

// newFenceCmd is `vigil fence show | reset` (docs/operations.md, "The
// leader fence"): inspect the leader fence row and its audit trail, or
// start a new fence generation after an etcd restore or a move between
// Lite and Pro. show talks to PostgreSQL directly, like `vigil migrate`,
// and so may reset with --database-url: the fence must be repairable when
// no replica runs. Without it, reset goes through the API of --server
// (POST /v1/fence/reset, the admin role), which every replica serves
// whether or not one leads, and records the caller's identity.
func newFenceCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{Use: "fence", Short: "Show or reset the leader fence (who may lead; audited)"}
	o := addClientFlags(cmd)
	cmd.PersistentFlags().StringVar(&url, "database-url", "", "PostgreSQL URL (show: required; reset: on the database instead of through the API)")
	output := &o.output
	open := func(cmd *cobra.Command) (*store.Store, error) {
		if url == "" {
			return nil, usageError("--database-url: required for vigil fence show")
		}
		if err := validOutput(*output); err != nil {
			return nil, err
		}
		st, err := controlplane.OpenStore(cmd.Context(), controlplane.Database{URL: url})
		if errors.Is(err, controlplane.ErrNotMigrated) {
			err = fmt.Errorf("%w: run `vigil migrate up --database-url ...` first", err)
		}
		return st, err
	}

	show := &cobra.Command{
		Use: "show", Short: "Show the fence (generation, domain, revision, holder) and its recent resets", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			f, err := st.FenceState(cmd.Context())
			if err != nil {
				return err
			}
			audit, err := st.FenceAudit(cmd.Context(), fenceAuditShown)
			if err != nil {
				return err
			}
			return renderOutput(*output, cmd.OutOrStdout(), view{
				api: struct {
					Fence  store.FenceState        `json:"fence"`
					Resets []store.FenceAuditEntry `json:"resets"`
				}{f, audit},
				table: func(io.Writer, bool) error { return printFence(cmd, f, audit) },
				names: func() []string { return []string{f.Name} },
			})
		},
	}

	var reason, actor string
	var yes bool
	reset := &cobra.Command{
		Use:   "reset",
		Short: "Start a new fence generation so that a candidate of any domain may lead again (audited)",
		Long: `Start a new fence generation: domain unset, revision 0, no holder. Every
term of the old generation is fenced out at its next write, and the next
candidate (a Pro replica with etcd's current revisions, or a Lite process)
takes the fence. Use it when leadership is blocked by the fence
(vigil_leader_fence_blocked = 1, /monitor/health "leader_fence_blocked"):
after etcd was restored from a backup or replaced, or after moving this
database between Lite and Pro. Through the API of --server (the default;
it needs the admin role) the reset is recorded with your identity and
--reason; with --database-url it is made on the database directly (when
no replica runs) and recorded with --actor. Either way the fence before
it is kept (vigil fence show lists the resets) and the audit log has it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageError("--reason: required: say why the fence is reset (it is recorded in the audit)")
			}
			if !yes {
				return usageError("--yes: required: a reset ends the current leader's term and lets any candidate lead; confirm with --yes")
			}
			if url == "" {
				if cmd.Flags().Changed("actor") {
					return usageError("--actor: only with --database-url; through the API the actor is the identity of --token")
				}
				return resetFenceByAPI(cmd, o, reason)
			}
			if strings.TrimSpace(actor) == "" {
				return usageError("--actor: must not be empty")
			}
			st, err := open(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			before, after, err := st.ResetFence(cmd.Context(), actor, reason)
			if err != nil {
				return err
			}
			slog.Default().Warn("leader fence reset (audited)", "actor", actor, "reason", reason,
				"before_generation", before.Generation, "before_domain", before.Domain.String(),
				"before_revision", before.Revision, "before_holder", before.Holder,
				"generation", after.Generation)
			if *output == "json" {
				return printJSON(cmd.OutOrStdout(), struct {
					Before store.FenceState `json:"before"`
					After  store.FenceState `json:"after"`
					Actor  string           `json:"actor"`
					Reason string           `json:"reason"`
				}{before, after, actor, reason})
			}
			fmt.Fprintf(cmd.OutOrStdout(),
				"fence reset by %s: generation %d (domain %s, revision %d, holder %s) -> generation %d; the next candidate of either domain may lead\n",
				actor, before.Generation, before.Domain, before.Revision, orNone(before.Holder), after.Generation)
			return nil
		},
	}
	rf := reset.Flags()
	rf.StringVar(&reason, "reason", "", "why the fence is reset, recorded in the audit (required)")
	rf.BoolVar(&yes, "yes", false, "confirm the reset (required)")
	rf.StringVar(&actor, "actor", defaultActor(), "with --database-url: who resets it, recorded in the audit (default user@host)")
	cmd.AddCommand(show, reset)
	return cmd
}

// resetFenceByAPI is `vigil fence reset` without --database-url: POST
// /v1/fence/reset as the identity of the client's token.
func resetFenceByAPI(cmd *cobra.Command, o *clientOpts, reason string) error {
	c, err := o.newClient()
	if err != nil {
		return err
	}
	var resp protocol.FenceResetResponse
	if err := c.Do(cmd.Context(), http.MethodPost, "/v1/fence/reset", protocol.FenceResetRequest{Reason: reason}, &resp); err != nil {
		return err
	}
	return o.render(cmd.OutOrStdout(), view{
		api: resp,
		table: func(w io.Writer, _ bool) error {
			b := resp.Before
			_, err := fmt.Fprintf(w, "fence reset by %s: generation %d (domain %s, revision %d, holder %s) -> generation %d; the next candidate of either domain may lead\n",
				resp.Actor, b.Generation, orNone(b.Domain), b.Revision, orNone(b.Holder), resp.After.Generation)
			return err
		},
		names: func() []string { return []string{resp.After.Name} },
	})
}

// printFence prints the fence and its resets as tables.
func printFence(cmd *cobra.Command, f store.FenceState, audit []store.FenceAuditEntry) error {
	out := cmd.OutOrStdout()
	tw := newTable(out)
	tableRow(tw, "GENERATION", "DOMAIN", "REVISION", "EPOCH", "HOLDER", "ACQUIRED")
	tableRow(tw, fmt.Sprint(f.Generation), f.Domain.String(), fmt.Sprint(f.Revision), fmt.Sprint(f.Epoch),
		orNone(f.Holder), fmtTimePtr(f.AcquiredAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(audit) == 0 {
		fmt.Fprintln(out, "\nno resets")
		return nil
	}
	fmt.Fprintln(out, "\nresets (newest first):")
	tw = newTable(out)
	tableRow(tw, "AT", "ACTOR", "FROM", "TO", "REASON")
	for _, a := range audit {
		from := fmt.Sprintf("gen %d %s rev %d %s", a.BeforeGen, a.BeforeDomain, a.BeforeRevision, orNone(a.BeforeHolder))
		tableRow(tw, fmtTime(a.At), a.Actor, from, fmt.Sprintf("gen %d", a.AfterGeneration), tableCell(a.Reason))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// defaultActor is user@host of this process, for the audit.
func defaultActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	if host == "" {
		return name
	}
	return name + "@" + host
}
