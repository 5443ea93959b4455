package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// newDagsBackfillCmd is `vigil dags backfill`: one backfill run per
// schedule slot in [--from, --to] (docs/schedules.md, "Backfill").
func newDagsBackfillCmd(o *clientOpts) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "backfill DAG_ID --from T --to T",
		Short: "Create backfill runs for the schedule slots of a past range",
		Long: `Create one run of type backfill for every slot of DAG_ID's schedule
whose logical date is in [--from, --to] (RFC 3339 times; --to not in the
future) and whose data interval has ended, at most 1000 per call. A slot
that already has a backfill run gets none, so a repeat creates nothing;
scheduled and manual runs are left alone. The runs queue under the DAG's
max_active_runs, also while it is paused (docs/schedules.md).`,
		Args: exactArgs("DAG_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fromT, err := flagTime("--from", from)
			if err != nil {
				return err
			}
			toT, err := flagTime("--to", to)
			if err != nil {
				return err
			}
			if fromT.After(toT) {
				return usageError("--from %s is after --to %s", from, to)
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			res, err := c.Backfill(cmd.Context(), args[0], fromT, toT)
			if err != nil {
				return rejected("backfill", err)
			}
			return o.render(cmd.OutOrStdout(), view{
				api: res,
				table: func(w io.Writer, _ bool) error {
					_, err := fmt.Fprintf(w, "dag %s backfill [%s, %s]: %d slots, %d runs created, %d already existed\n",
						res.DAGID, fmtTime(res.From), fmtTime(res.To), res.Slots, res.Created, res.Existing)
					return err
				},
				names: namesOf(res.RunIDs, func(id int64) string { return strconv.FormatInt(id, 10) }),
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "first logical date of the range, RFC 3339 (required)")
	cmd.Flags().StringVar(&to, "to", "", "last logical date of the range, RFC 3339, inclusive (required)")
	return cmd
}

// flagTime parses a required RFC 3339 flag value; a missing or malformed
// one is a usage error (exit 2) naming the flag.
func flagTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, usageError("%s is required (an RFC 3339 time such as 2026-01-02T00:00:00Z)", flag)
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError("%s %q: not an RFC 3339 time such as 2026-01-02T00:00:00Z", flag, v)
	}
	return t, nil
}
