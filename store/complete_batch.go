package store

import (
	"context"

	"github.com/vigil-sched/vigil/state"
)

// CompletionResult is the outcome of one completion of a CompleteBatch:
// what Complete would have returned for it alone.
type CompletionResult struct {
	State state.TI
	Late  bool
	Err   error
}

// completeSuccessSQL applies every success of a batch whose attempt is
// current, running and the agent's own, in one statement: the guarded
// UPDATE ($1 agent; $2, $3, $4 the TI ids, attempt ids and exit codes,
// parallel arrays), the events, the runs' run_dirty marks and the
// scheduler's wake-up. It returns the TI ids it applied. A row is locked
// in id order first, so two batches (or a batch and a reaper, or a
// heartbeat) over the same TIs queue rather than deadlock. A success
// proves its process started: a TI whose start its agent did not report
// (agent/task.go waiveStartReport) gets started_at from it too, and no
// ti_started event: such an attempt's start is its completion's time
// (docs/design.md §4 heartbeat).
//
// Rows are found by primary key from $2 and each row's attempt and exit
// code by its position in the arrays, never by joining the batch with the
// agent's TIs: after a mass claim the planner expects one running TI per
// agent, and a join of that shape is what it ran as a loop over the
// listed attempts per TI in the heartbeat (store/heartbeat.go). This form
// is linear under any plan (TestCompletionBatchWorkIsLinear).
// The lock step runs whole before the update reads a row: the update's
// one-time filter counts it. completeSuccessOutputsSQL is the same
// statement for a batch that carries outputs ($5, $6: each TI's outputs
// and their bytes, parallel to $2, NULL for none), stored with the
// success they belong to (outputs.go); a batch without any keeps the
// statement it had before outputs existed.
var completeSuccessSQL = completeSuccess("")

var completeSuccessOutputsSQL = completeSuccess(`
	outs AS (` + upsertOutputsSQL + `
	  SELECT u.id, u.try_number, o.outputs, o.bytes
	    FROM upd u JOIN unnest($2::bigint[], $5::jsonb[], $6::int[]) AS o(id, outputs, bytes) ON o.id = u.id
	   WHERE o.outputs IS NOT NULL ` + onOutputsConflictSQL + `),`)

func completeSuccess(outs string) string {
	return `
	WITH lk AS (
	  SELECT t.id FROM task_instances t
	   WHERE t.id = ANY ($2::bigint[]) AND t.state = 'running' AND t.agent_id = $1
	   ORDER BY t.id FOR NO KEY UPDATE OF t),
	upd AS (
	  UPDATE task_instances t
	     SET state = ` + moveBatchSuccess.To() + `, reason = NULL, message = format('try %s succeeded', t.try_number),
	         exit_code = ($4::int[])[array_position($2::bigint[], t.id)],
	         started_at = coalesce(t.started_at, now()),
	         end_date = now(), next_retry_at = NULL, updated_at = now()
	   WHERE (SELECT count(*) FROM lk) >= 0
	     AND t.id = ANY ($2::bigint[]) AND t.state IN ` + moveBatchSuccess.From() + ` AND t.agent_id = $1
	     AND t.attempt_id = ($3::uuid[])[array_position($2::bigint[], t.id)]
	  RETURNING t.id, t.run_id, t.task_id, t.try_number, t.attempt_id, t.agent_id, t.message),` + outs + `
	ev AS (
	  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
	  SELECT run_id, id, task_id, try_number, attempt_id, agent_id, 'ti_success', message FROM upd),
	dirty AS (
	  INSERT INTO run_dirty (run_id) SELECT DISTINCT run_id FROM upd)
	SELECT coalesce(array_agg(id), '{}'),
	       CASE WHEN count(*) > 0 THEN pg_notify('` + ChanScheduler + `', '')::text END
	  FROM upd`
}

// CompleteBatch records many completions of agentID's attempts
// (docs/design.md §4 complete). Every success whose attempt is current
// and running is applied in one statement (completeSuccessSQL), each
// still guarded by its attempt_id; every other item (a failure, which
// needs its TI's retry policy, a stale or foreign attempt, a late
// success) goes through Complete on its own, so its result and error are
// exactly Complete's: a stale attempt in the batch is refused alone
// (*StaleAttemptError) while the others apply. The results are in the
// order of reqs.
func (s *Store) CompleteBatch(ctx context.Context, agentID int64, reqs []Completion) []CompletionResult {
	out := make([]CompletionResult, len(reqs))
	var ids []int64
	var attempts []string
	var codes []*int
	var outs [][]byte
	var outBytes []int
	withOutputs := false
	for _, r := range reqs {
		if r.Outcome != state.OutcomeSuccess {
			continue
		}
		o, n, err := outputsArg(r.Outputs)
		if err != nil {
			continue // the single path reports it
		}
		withOutputs = withOutputs || o != nil
		ids, attempts, codes = append(ids, r.TIID), append(attempts, r.AttemptID), append(codes, r.ExitCode)
		outs, outBytes = append(outs, o), append(outBytes, n)
	}
	applied := map[int64]bool{}
	if len(ids) > 0 {
		var done []int64
		var err error
		if withOutputs {
			err = s.pool.QueryRow(ctx, completeSuccessOutputsSQL, agentID, ids, attempts, codes, outs, outBytes).Scan(&done, new(*string))
		} else {
			err = s.pool.QueryRow(ctx, completeSuccessSQL, agentID, ids, attempts, codes).Scan(&done, new(*string))
		}
		if err != nil {
			// Nothing was applied: every item takes the single path, which
			// reports its own error.
			done = nil
		}
		for _, id := range done {
			applied[id] = true
		}
	}
	for i, r := range reqs {
		if r.Outcome == state.OutcomeSuccess && applied[r.TIID] {
			out[i].State = state.TISuccess
			delete(applied, r.TIID) // a repeat of the TI in the batch is judged alone
			continue
		}
		out[i].State, out[i].Late, out[i].Err = s.Complete(ctx, agentID, r)
	}
	return out
}
