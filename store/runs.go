package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
)

// TriggerRun creates a queued manual run of dagID with one TI per task,
// copying the task definitions so later applies do not change this run.
// Errors: ErrNotFound when the DAG does not exist.
func (s *Store) TriggerRun(ctx context.Context, dagID string) (Run, error) {
	return s.TriggerRunConf(ctx, dagID, nil)
}

// TriggerRunConf is TriggerRun with the run's parameters: conf is checked
// against the DAG's params and its defaults filled (dag.Spec.CheckConf)
// and stored in runs.conf. Errors: ErrNotFound when the DAG does not
// exist; a *dag.ConfError naming the key and rule when conf breaks one.
func (s *Store) TriggerRunConf(ctx context.Context, dagID string, conf map[string]any) (Run, error) {
	spec, _, err := s.GetDAG(ctx, dagID)
	if err != nil {
		return Run{}, err
	}
	checked, err := spec.CheckConf(conf)
	if err != nil {
		return Run{}, err
	}
	var run Run
	err = s.writeTx(ctx, func(tx pgx.Tx) error {
		if err := lockDAGRow(ctx, tx, dagID); err != nil {
			return err
		}
		run, _, err = createRunTx(ctx, tx, spec, runOrigin{Type: RunManual, Conf: checked})
		return err
	})
	if err != nil {
		return Run{}, fmt.Errorf("trigger run of %q: %w", dagID, err)
	}
	return run, nil
}

// Run types (runs.run_type; docs/schedules.md).
const (
	RunManual    = "manual"
	RunScheduled = "scheduled"
	RunBackfill  = "backfill"
)

// runOrigin says how a run comes to be: its type and, for a scheduled or
// backfill run, its slot.
type runOrigin struct {
	Type string
	// Slot is set for scheduled and backfill runs.
	Slot *Slot
	// Conf is the run's checked parameters; empty: none (runs.conf NULL).
	Conf map[string]any
}

// createRunTx inserts a queued run of spec with one TI per task, a
// run_queued event and a run_dirty row, inside tx. A scheduled or
// backfill run gets the DAG's param defaults as its conf. A scheduled or
// backfill run whose slot already has one of its type is not created: it
// returns created false and no error (INSERT … ON CONFLICT DO NOTHING on
// runs_scheduled_slot_idx or runs_backfill_slot_idx).
func createRunTx(ctx context.Context, tx pgx.Tx, spec *dag.Spec, o runOrigin) (Run, bool, error) {
	var run Run
	var timeout *int64
	if spec.Timeout > 0 {
		us := micros(spec.Timeout.D())
		timeout = &us
	}
	var logical, ivStart, ivEnd *time.Time
	if o.Slot != nil {
		logical, ivStart, ivEnd = &o.Slot.LogicalDate, &o.Slot.IntervalStart, &o.Slot.IntervalEnd
	}
	if o.Conf == nil && o.Type != RunManual && len(spec.Params) > 0 {
		// A scheduled or backfill run takes the params' defaults.
		var err error
		if o.Conf, err = spec.CheckConf(nil); err != nil {
			return Run{}, false, err
		}
	}
	var conf []byte
	if len(o.Conf) > 0 {
		var err error
		if conf, err = json.Marshal(o.Conf); err != nil {
			return Run{}, false, fmt.Errorf("conf: %w", err)
		}
	}
	conflict := ""
	switch o.Type {
	case RunScheduled:
		conflict = `ON CONFLICT (dag_id, logical_date) WHERE run_type = 'scheduled' DO NOTHING`
	case RunBackfill:
		conflict = `ON CONFLICT (dag_id, logical_date) WHERE run_type = 'backfill' DO NOTHING`
	}
	// A slot that already has its run inserts nothing, and draws no id
	// from the sequence: ON CONFLICT alone would draw one first, and run
	// ids would skip one per existing slot of a repeated backfill. Only
	// two transactions racing for one new slot can still leave a gap (the
	// loser's id), which ON CONFLICT then absorbs.
	err := tx.QueryRow(ctx, `
		INSERT INTO runs (dag_id, timeout, max_active_tasks, deadline_at,
		    run_type, logical_date, data_interval_start, data_interval_end, conf, sla_at)
		SELECT $1, $2 * interval '1 microsecond', $3, now() + $2 * interval '1 microsecond', $4, $5, $6, $7, $8::jsonb,
		       `+slaAtSQL+`
		 WHERE $5::timestamptz IS NULL
		    OR NOT EXISTS (SELECT 1 FROM runs x WHERE x.dag_id = $1 AND x.logical_date = $5 AND x.run_type = $4)
		`+conflict+`
		RETURNING id, dag_id, state, queued_at`, spec.DAGID, timeout, spec.MaxActiveTasks,
		o.Type, logical, ivStart, ivEnd, conf, nullMicros(spec.SLA.D())).
		Scan(&run.ID, &run.DAGID, &run.State, &run.QueuedAt)
	if errors.Is(err, pgx.ErrNoRows) && conflict != "" {
		return Run{}, false, nil
	}
	if err != nil {
		return Run{}, false, err
	}
	run.RunType, run.LogicalDate, run.IntervalStart, run.IntervalEnd = o.Type, logical, ivStart, ivEnd
	if len(o.Conf) > 0 {
		run.Conf = o.Conf
	}
	if err := insertTIs(ctx, tx, run.ID, spec, fmt.Sprintf("%s run of %s queued with %d tasks%s", o.Type, spec.DAGID, len(spec.Tasks), byActor(ctx))); err != nil {
		return Run{}, false, err
	}
	return run, true, nil
}

// tiRow is one task of a run as insertTIs sends it, in JSON.
type tiRow struct {
	TaskID             string                  `json:"task_id"`
	Ordinal            int                     `json:"ordinal"`
	Command            []string                `json:"command"`
	Env                map[string]dag.EnvValue `json:"env"` // a secret as its reference, never its value
	Tags               []string                `json:"tags"`
	Upstream           []string                `json:"upstream"`
	Retries            int                     `json:"retries"`
	RetryDelayUS       int64                   `json:"retry_delay_us"`
	RetryExponential   bool                    `json:"retry_exponential"`
	MaxRetryDelayUS    *int64                  `json:"max_retry_delay_us"`
	ExecutionTimeoutUS *int64                  `json:"execution_timeout_us"`
	RunAsUser          string                  `json:"run_as_user"`
	TriggerRule        string                  `json:"trigger_rule"`
	SkipExitCode       int                     `json:"skip_exit_code"`
	Pool               string                  `json:"pool"`
	PriorityWeight     int                     `json:"priority_weight"`
}

// insertTIs inserts every TI of a new run, its run_queued event and its
// run_dirty mark, with the scheduler's wake-up, in one statement: the
// tasks travel as one JSON array (text[] columns cannot be unnested from
// a two-dimensional array).
func insertTIs(ctx context.Context, tx pgx.Tx, runID int64, spec *dag.Spec, msg string) error {
	rows := make([]tiRow, len(spec.Tasks))
	for i, t := range spec.Tasks {
		r := tiRow{TaskID: t.ID, Ordinal: i, Command: t.Command, Env: t.Env, Tags: nonNil(t.Tags), Upstream: nonNil(t.DependsOn),
			Retries: t.Retries, RetryDelayUS: micros(t.RetryDelay.D()), RetryExponential: t.RetryExponentialBackoff,
			MaxRetryDelayUS: nullMicros(t.MaxRetryDelay.D()), RunAsUser: t.RunAsUser,
			TriggerRule: string(t.TriggerRule.Rule()), SkipExitCode: int(t.SkipExitCode),
			Pool: t.Pool, PriorityWeight: t.EffectivePriorityWeight()}
		if r.Env == nil {
			r.Env = map[string]dag.EnvValue{}
		}
		if t.ExecutionTimeout > 0 {
			us := micros(t.ExecutionTimeout.D())
			r.ExecutionTimeoutUS = &us
		}
		rows[i] = r
	}
	tasks, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH ti AS (
		  INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, env, required_tags,
		      upstream, retries, retry_delay, retry_exponential, max_retry_delay, execution_timeout, run_as_user,
		      trigger_rule, skip_exit_code, pool, priority_weight)
		  SELECT $1, $2, x.task_id, x.ordinal, `+jsonTextArray("x.command")+`, x.env, `+jsonTextArray("x.tags")+`, `+jsonTextArray("x.upstream")+`,
		         x.retries, x.retry_delay_us * interval '1 microsecond', x.retry_exponential,
		         coalesce(x.max_retry_delay_us * interval '1 microsecond', interval '1 hour'),
		         x.execution_timeout_us * interval '1 microsecond', nullif(x.run_as_user, ''),
		         x.trigger_rule, nullif(x.skip_exit_code, 0), x.pool, x.priority_weight
		    FROM jsonb_to_recordset($3::jsonb) AS x(task_id text, ordinal int, command jsonb, env jsonb, tags jsonb,
		         upstream jsonb, retries int, retry_delay_us bigint, retry_exponential bool,
		         max_retry_delay_us bigint, execution_timeout_us bigint, run_as_user text,
		         trigger_rule text, skip_exit_code int, pool text, priority_weight int)),
		ev AS (
		  INSERT INTO events (run_id, kind, message) VALUES ($1, 'run_queued', $4)),
		dirty AS (
		  INSERT INTO run_dirty (run_id) VALUES ($1))
		SELECT pg_notify('`+ChanScheduler+`', '')`, runID, spec.DAGID, tasks, msg)
	return err
}

// jsonTextArray is the SQL that turns the JSON array of strings col into
// a text[], keeping its order.
func jsonTextArray(col string) string {
	return `ARRAY(SELECT e FROM jsonb_array_elements_text(` + col + `) WITH ORDINALITY AS a(e, n) ORDER BY n)`
}

// nonNil makes a nil list an empty array parameter or JSON array, not
// NULL.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// runColumns is the column list scanned by scanRun.
const runColumns = `r.id, r.dag_id, r.state, coalesce(r.reason, ''), coalesce(r.message, ''),
	r.queued_at, r.start_date, r.end_date, r.run_type, r.logical_date, r.data_interval_start, r.data_interval_end, r.conf,
	(SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
	   (SELECT state, count(*) AS n FROM task_instances WHERE run_id = r.id GROUP BY state) c)`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	var counts, conf []byte
	err := row.Scan(&r.ID, &r.DAGID, &r.State, &r.Reason, &r.Message, &r.QueuedAt, &r.StartDate, &r.EndDate,
		&r.RunType, &r.LogicalDate, &r.IntervalStart, &r.IntervalEnd, &conf, &counts)
	if err != nil {
		return r, err
	}
	if conf != nil {
		if err := json.Unmarshal(conf, &r.Conf); err != nil {
			return r, fmt.Errorf("run %d: conf: %w", r.ID, err)
		}
	}
	err = json.Unmarshal(counts, &r.TaskCounts)
	return r, err
}

// ListRuns returns the newest runs first, optionally filtered by runState
// (empty = all) and dagID (empty = all). limit ≤ 0 means 100.
func (s *Store) ListRuns(ctx context.Context, runState state.Run, dagID string, limit int) ([]Run, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, listRunsSQL(runState != "", dagID != ""), plannedEachTime,
		string(runState), dagID, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Run, error) { return scanRun(r) })
}

// plannedEachTime is the pgx mode of the reads whose best plan depends on
// their arguments (ListRuns, DAGGrid): an unnamed statement, planned with
// the values each time it runs, never a cached generic plan.
const plannedEachTime = pgx.QueryExecModeExec

// listRunsSQL is ListRuns' statement for one combination of filters ($1
// the state, $2 the DAG, $3 the limit; an unused parameter is compared
// with itself so that every variant takes the same arguments). One
// statement per combination, not one with "$1 = ” OR state = $1": no
// plan can drop an OR on a parameter, so a filter by a rare state walked
// runs_pkey newest first over the whole history. Each variant has an
// index that gives its rows in order (runs_pkey, runs_dag_idx,
// runs_state_idx, runs_dag_state_idx), so a page reads its runs and their
// TIs' counts only, whatever the history (TestAPIReadsDoNotGrowWithHistory).
// ListRuns sends it with pgx.QueryExecModeExec, planned with its
// arguments each time: a generic plan, which PostgreSQL may settle a
// prepared statement on, estimates a DAG's share of the runs as an
// average, and for a DAG with few recent runs among busy ones walked
// runs_pkey past the others' history.
func listRunsSQL(byState, byDAG bool) string {
	where := "$1 = $1 AND $2 = $2"
	switch {
	case byState && byDAG:
		where = "r.dag_id = $2 AND r.state = $1"
	case byState:
		where = "r.state = $1 AND $2 = $2"
	case byDAG:
		where = "r.dag_id = $2 AND $1 = $1"
	}
	return `SELECT ` + runColumns + ` FROM runs r WHERE ` + where + ` ORDER BY r.id DESC LIMIT $3`
}

// tiColumns is the column list scanned by scanTI.
const tiColumns = `t.id, t.run_id, t.task_id, t.state, coalesce(t.reason, ''), coalesce(t.message, ''),
	t.try_number, t.retries + t.retry_base + 1, t.dispatch_attempts, coalesce(t.attempt_id::text, ''), t.agent_id, t.exit_code,
	t.queued_at, t.claimed_at, t.started_at, t.last_heartbeat_at, t.end_date, t.next_retry_at, t.log_dropped, t.ordinal`

func scanTI(row pgx.Row) (TaskInstance, error) {
	var t TaskInstance
	err := row.Scan(&t.ID, &t.RunID, &t.TaskID, &t.State, &t.Reason, &t.Message,
		&t.TryNumber, &t.MaxTries, &t.DispatchAttempts, &t.AttemptID, &t.AgentID, &t.ExitCode,
		&t.QueuedAt, &t.ClaimedAt, &t.StartedAt, &t.LastHeartbeatAt, &t.EndDate, &t.NextRetryAt, &t.LogDropped, &t.Ordinal)
	return t, err
}

// runTIsSQL reads run $1's TIs in declaration order through the
// (run_id, task_id) key: the run's own TIs, whatever the history.
const runTIsSQL = `SELECT ` + tiColumns + ` FROM task_instances t WHERE t.run_id = $1 ORDER BY t.ordinal`

// GetRun returns a run with its TIs in declaration order, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (RunDetail, error) {
	run, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return RunDetail{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return RunDetail{}, fmt.Errorf("get run %d: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, runTIsSQL, id)
	if err != nil {
		return RunDetail{}, fmt.Errorf("get run %d: %w", id, err)
	}
	tis, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TaskInstance, error) { return scanTI(r) })
	if err != nil {
		return RunDetail{}, fmt.Errorf("get run %d: %w", id, err)
	}
	if err := s.attachLate(ctx, id, tis); err != nil {
		return RunDetail{}, fmt.Errorf("get run %d: %w", id, err)
	}
	return RunDetail{Run: run, TaskInstances: tis}, nil
}

// cancelRunTx cancels run runID and every non-terminal TI of it inside
// tx, with events and a scheduler wake-up. The caller has checked (and
// locked) the run's state.
func cancelRunTx(ctx context.Context, tx pgx.Tx, runID int64, reason state.Reason, message string) error {
	m := moveCancelByOperator
	if reason == state.ReasonRunTimeout {
		m = moveCancelByTimeout
	}
	_, err := tx.Exec(ctx, `
		WITH c AS (
		  UPDATE task_instances SET state = `+m.To()+`, reason = $2, message = $3,
		         end_date = now(), next_retry_at = NULL, updated_at = now()
		   WHERE run_id = $1 AND state IN `+m.From()+`
		  RETURNING id, run_id, task_id, try_number, attempt_id, agent_id)
		, e AS (
		INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		SELECT run_id, id, task_id, try_number, attempt_id, agent_id, 'ti_cancelled', $3 FROM c)
		SELECT pg_notify($4, a.agent_id::text) FROM (SELECT DISTINCT agent_id FROM c WHERE agent_id IS NOT NULL) a`,
		runID, string(reason), message, ChanStop)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH r AS (
		  UPDATE runs SET state = 'cancelled', reason = $2, message = $3, end_date = now(), updated_at = now()
		   WHERE id = $1 RETURNING id)
		INSERT INTO events (run_id, kind, message) SELECT id, 'run_cancelled', $3 FROM r`,
		runID, string(reason), message)
	if err != nil {
		return err
	}
	if _, err := wakeHeldTx(ctx, tx, []int64{runID}); err != nil {
		return err
	}
	return markDirty(ctx, tx, runID)
}

// CancelRun cancels a queued or running run and every non-terminal TI of
// it with reason (state.ReasonCancelled by an operator, or
// state.ReasonRunTimeout). Agents running its TIs are told to stop at
// their next heartbeat, and woken for it at once (ChanStop). Errors: ErrNotFound; ErrConflict when the run is
// already terminal.
func (s *Store) CancelRun(ctx context.Context, runID int64, reason state.Reason, message string) (Run, error) {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		var cur state.Run
		err := tx.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1 FOR NO KEY UPDATE`, runID).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %d: %w", runID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if cur.Terminal() {
			return fmt.Errorf("it is already %s: %w", cur, ErrConflict)
		}
		return cancelRunTx(ctx, tx, runID, reason, message)
	})
	if err != nil {
		return Run{}, fmt.Errorf("cancel run %d: %w", runID, err)
	}
	d, err := s.GetRun(ctx, runID)
	return d.Run, err
}
