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
// in id order first, so two batches (or a batch and a reaper) over the
// same TIs queue rather than deadlock.
const completeSuccessSQL = `
	WITH c AS (
	  SELECT * FROM unnest($2::bigint[], $3::uuid[], $4::int[]) AS c(ti_id, attempt_id, exit_code)),
	lk AS (
	  -- By primary key from the batch, not by the agent's TIs joined with
	  -- it: the planner may expect one running TI per agent and loop over
	  -- the batch for each (see heartbeatSQL).
	  SELECT t.id FROM task_instances t
	   WHERE t.id = ANY ($2::bigint[]) AND t.state = 'running' AND t.agent_id = $1
	   ORDER BY t.id FOR NO KEY UPDATE OF t),
	upd AS (
	  UPDATE task_instances t
	     SET state = 'success', reason = NULL, message = format('try %s succeeded', t.try_number),
	         exit_code = c.exit_code, end_date = now(), next_retry_at = NULL, updated_at = now()
	    FROM lk, c
	   WHERE t.id = lk.id AND c.ti_id = t.id AND c.attempt_id = t.attempt_id
	     AND t.state = 'running' AND t.agent_id = $1
	  RETURNING t.id, t.run_id, t.task_id, t.try_number, t.attempt_id, t.agent_id, t.message),
	ev AS (
	  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
	  SELECT run_id, id, task_id, try_number, attempt_id, agent_id, 'ti_success', message FROM upd),
	dirty AS (
	  INSERT INTO run_dirty (run_id) SELECT DISTINCT run_id FROM upd)
	SELECT coalesce(array_agg(id), '{}'),
	       CASE WHEN count(*) > 0 THEN pg_notify('` + ChanScheduler + `', '')::text END
	  FROM upd`

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
	for _, r := range reqs {
		if r.Outcome == OutcomeSuccess {
			ids, attempts, codes = append(ids, r.TIID), append(attempts, r.AttemptID), append(codes, r.ExitCode)
		}
	}
	applied := map[int64]bool{}
	if len(ids) > 0 {
		var done []int64
		err := s.pool.QueryRow(ctx, completeSuccessSQL, agentID, ids, attempts, codes).Scan(&done, new(*string))
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
		if r.Outcome == OutcomeSuccess && applied[r.TIID] {
			out[i].State = state.TISuccess
			delete(applied, r.TIID) // a repeat of the TI in the batch is judged alone
			continue
		}
		out[i].State, out[i].Late, out[i].Err = s.Complete(ctx, agentID, r)
	}
	return out
}
