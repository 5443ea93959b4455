package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/retry"
	"github.com/vigil-sched/vigil/state"
)

// tiAttempt is the part of a TI row a completion decides on.
type tiAttempt struct {
	runID, tiID    int64
	taskID         string
	state          state.TI
	reason         state.Reason
	attemptID      string
	agentID        *int64
	tryNumber      int
	skipExitCode   *int // the task's skip_exit_code, if any
	policy         retry.Policy
	runState       state.Run
	hasNewerClaims bool
}

func (s *Store) loadAttempt(ctx context.Context, tx pgx.Tx, tiID int64) (tiAttempt, error) {
	var a tiAttempt
	var delayUS, maxUS int64
	err := tx.QueryRow(ctx, `
		SELECT t.run_id, t.id, t.task_id, t.state, coalesce(t.reason, ''), coalesce(t.attempt_id::text, ''),
		       t.agent_id, t.try_number, t.skip_exit_code, t.retries + t.retry_base,
		       (extract(epoch FROM t.retry_delay) * 1e6)::bigint, t.retry_exponential,
		       (extract(epoch FROM t.max_retry_delay) * 1e6)::bigint, r.state
		  FROM task_instances t JOIN runs r ON r.id = t.run_id WHERE t.id = $1
		   FOR UPDATE OF t`, tiID).
		Scan(&a.runID, &a.tiID, &a.taskID, &a.state, &a.reason, &a.attemptID, &a.agentID, &a.tryNumber,
			&a.skipExitCode, &a.policy.Retries, &delayUS, &a.policy.Exponential, &maxUS, &a.runState)
	if errNoRows(err) {
		return a, fmt.Errorf("task instance %d: %w", tiID, ErrNotFound)
	}
	a.policy.Delay, a.policy.MaxDelay = fromMicros(delayUS), fromMicros(maxUS)
	return a, err
}

// Complete records an agent's outcome for the current attempt of a TI:
// success, or up_for_retry while the retry.Policy has budget, else failed
// (reason from failureReason). The UPDATE re-checks attempt_id and state,
// so a reaper or a newer claim that committed first wins.
//
// A success of an attempt a reaper gave up on is never lost
// (docs/design.md §6; docs/reliability.md, invariant 4): it is accepted
// (newState success, late true) while the run is live and no newer
// attempt was claimed; otherwise it changes nothing and is recorded on the
// TI's attempt history (TaskInstance.Late; late true the first time, false
// for a replay; adr/0014-late-success-after-run-end.md).
//
// Errors: ErrNotFound (no such TI), ErrForbidden (the attempt belongs to
// another agent), *StaleAttemptError (not the current attempt).
func (s *Store) Complete(ctx context.Context, agentID int64, req Completion) (newState state.TI, late bool, err error) {
	lockRun := false
	for {
		newState, late, err = s.completeTx(ctx, agentID, req, lockRun)
		if !errors.Is(err, errNeedRunLock) {
			break
		}
		lockRun = true // the late path: redo it holding the run row first
	}
	if err != nil {
		return "", false, fmt.Errorf("complete task instance %d: %w", req.TIID, err)
	}
	return newState, late, nil
}

// errNeedRunLock makes Complete retry a late completion with the run row
// locked before the TI row: the order cancelRunTx uses, so the two never
// deadlock.
var errNeedRunLock = errors.New("late completion needs the run lock")

// lateEligible reports whether a success of the same attempt may still
// overturn a reaper's decision: the run is live, the reaper only judged
// the agent unreachable (agent_lost, dispatch_lost), and the state
// machine lets a late completion move the TI to success.
func lateEligible(a tiAttempt, outcome state.Outcome) bool {
	if outcome != state.OutcomeSuccess || a.runState != state.RunRunning {
		return false
	}
	if a.reason != state.ReasonAgentLost && a.reason != state.ReasonDispatchLost {
		return false
	}
	return state.Allowed(a.state, state.TISuccess, state.ActorLateComplete)
}

func (s *Store) completeTx(ctx context.Context, agentID int64, req Completion, lockRun bool) (newState state.TI, late bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if lockRun {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE id = (SELECT run_id FROM task_instances WHERE id = $1) FOR NO KEY UPDATE`, req.TIID); err != nil {
				return err
			}
		}
		a, err := s.loadAttempt(ctx, tx, req.TIID)
		if err != nil {
			return err
		}
		if a.attemptID != req.AttemptID {
			if req.Outcome == state.OutcomeSuccess {
				wrote, reaped, err := recordSupersededLateTx(ctx, tx, a, agentID, req)
				if err != nil || reaped {
					newState, late = a.state, wrote
					return err
				}
			}
			return &StaleAttemptError{TIID: a.tiID, Reason: stopReason(a.state, a.attemptID, req.AttemptID, a.reason),
				State: a.state}
		}
		if a.agentID == nil || *a.agentID != agentID {
			return fmt.Errorf("task instance %d attempt %s belongs to another agent: %w", a.tiID, req.AttemptID, ErrForbidden)
		}
		if a.state == state.TIRunning {
			var kind state.EventKind
			var msg string
			newState, kind, msg = decideOutcome(a, req)
			var reason state.Reason
			switch newState {
			case state.TISuccess:
			case state.TISkipped:
				reason = state.ReasonSkipExitCode
			default:
				reason = failureReason(req)
			}
			return s.finishTI(ctx, tx, a, req, newState, reason, kind, msg)
		}
		if a.state == state.TICancelled {
			if !lockRun {
				return errNeedRunLock // it moves the run's end time too
			}
			newState = a.state
			return recordStoppedEndTx(ctx, tx, a)
		}
		if !lateEligible(a, req.Outcome) {
			if lateAfterRunEnd(a, req.Outcome) {
				newState = a.state
				late, err = recordLateTx(ctx, tx, a, req)
				return err
			}
			return &StaleAttemptError{TIID: a.tiID, Reason: stopReason(a.state, a.attemptID, req.AttemptID, a.reason),
				State: a.state}
		}
		if !lockRun {
			return errNeedRunLock
		}
		newState, late = state.TISuccess, true
		return s.acceptLate(ctx, tx, a, req)
	})
	return newState, late, err
}

// recordStoppedEndTx takes the completion of an attempt its agent stopped
// on a cancel as the moment its last process ended: the cancelled TI's
// end time, and its run's when later (docs/design.md §4 cancel). Nothing
// else changes; a replay moves nothing back. The caller holds the run row
// lock, then the TI's, the order cancelRunTx takes them in.
func recordStoppedEndTx(ctx context.Context, tx pgx.Tx, a tiAttempt) error {
	_, err := tx.Exec(ctx, `
		WITH t AS (
		  UPDATE task_instances SET end_date = greatest(end_date, now()), updated_at = now()
		   WHERE id = $1 AND state = 'cancelled' RETURNING run_id, end_date)
		UPDATE runs r SET end_date = greatest(r.end_date, t.end_date), updated_at = now()
		  FROM t WHERE r.id = t.run_id AND r.state = 'cancelled'`, a.tiID)
	return err
}

// acceptLate records a success that arrived after a reaper gave up on the
// same attempt. Exactly the dependents marked upstream_failed because of
// it are returned to 'none' (reopenDependentsTx; the scheduler re-derives
// them on its next tick), and the run row is touched so a finalizer that
// read the old state cannot finalize over it. The caller holds the run
// row lock.
func (s *Store) acceptLate(ctx context.Context, tx pgx.Tx, a tiAttempt, req Completion) error {
	msg := fmt.Sprintf("success of try %d accepted after %s (state was %s)", a.tryNumber, a.reason, a.state)
	if err := s.finishTI(ctx, tx, a, req, state.TISuccess, "", state.EventLateAccepted, msg); err != nil {
		return err
	}
	if a.state == state.TIFailed {
		if _, err := reopenDependentsTx(ctx, tx, a); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET updated_at = now() WHERE id = $1`, a.runID)
	if f := s.signals.LateAccepted; err == nil && f != nil {
		f(ctx)
	}
	return err
}

// failureReason is the reason recorded for a failed completion. Every
// failure spends a try of the retry budget alike (decideOutcome): a start
// failure may be particular to one agent's host, so its retry may well
// start elsewhere, and a task killed by its agent's shutdown is the
// agent_lost case of a stop announced in advance, which spends one too.
// An old agent sends no Failure: exit_code, as before.
//
// Ifs, not a tagless switch, here and in decideOutcome: Go's coverage
// gives a case condition no block, so the mutation run could not test it
// (docs/reliability.md, "Mutation score").
func failureReason(req Completion) state.Reason {
	if req.Outcome == state.OutcomeExecutionTimeout {
		return state.ReasonExecutionTimeout
	}
	if req.Failure == state.FailureAgentShutdown {
		return state.ReasonAgentShutdown
	}
	if req.Failure == state.FailureSignal {
		return state.ReasonSignal
	}
	if req.Failure == state.FailureStartFailed {
		return state.ReasonStartFailed
	}
	if req.Failure == state.FailureSecretMissing {
		return state.ReasonSecretMissing
	}
	if req.Failure == state.FailureOutputTooLarge {
		return state.ReasonOutputTooLarge
	}
	if req.Failure == state.FailureOutputInvalid {
		return state.ReasonOutputInvalid
	}
	return state.ReasonExitCode
}

// decideOutcome maps a completion to the TI's next state, event kind and
// message, applying the retry policy. A process that exited by itself
// with the task's skip_exit_code ends skipped, without a retry
// (docs/trigger-rules.md): the agent reports the exit status, and this is
// where it becomes an outcome.
func decideOutcome(a tiAttempt, req Completion) (to state.TI, kind state.EventKind, msg string) {
	if req.Outcome == state.OutcomeSuccess {
		return state.TISuccess, state.EventTISuccess, fmt.Sprintf("try %d succeeded", a.tryNumber)
	}
	if exitedToSkip(a, req) {
		return state.TISkipped, state.EventTISkipped,
			fmt.Sprintf("try %d exited with code %d, the task's skip_exit_code: skipped", a.tryNumber, *req.ExitCode)
	}
	what := "failed"
	if req.Outcome == state.OutcomeExecutionTimeout {
		what = "exceeded its execution_timeout"
	} else if req.Failure == state.FailureAgentShutdown {
		what = "was killed because its agent shut down"
	} else if req.Failure == state.FailureSignal {
		what = "was killed by signal " + req.Signal
	} else if req.Failure == state.FailureStartFailed || req.Failure == state.FailureSecretMissing {
		what = "could not start: " + req.Error
	} else if req.Failure == state.FailureOutputTooLarge || req.Failure == state.FailureOutputInvalid {
		what = "exited 0 but its outputs were refused: " + req.Error
	} else if req.ExitCode != nil {
		what = fmt.Sprintf("exited with code %d", *req.ExitCode)
	} else if req.Error != "" {
		what = "failed: " + req.Error
	}
	if ok, delay := a.policy.Next(a.tryNumber); ok {
		return state.TIUpForRetry, state.EventTIUpForRetry,
			fmt.Sprintf("try %d %s; retry %d of %d in %s", a.tryNumber, what, a.tryNumber, a.policy.Retries, delay)
	}
	return state.TIFailed, state.EventTIFailed, fmt.Sprintf("try %d %s; no retries left", a.tryNumber, what)
}

// exitedToSkip reports whether a failed completion is the task asking to
// be skipped: its process exited with the task's skip_exit_code, not
// killed, timed out or unable to start.
func exitedToSkip(a tiAttempt, req Completion) bool {
	return req.Outcome == state.OutcomeFailed && req.Failure == "" && req.ExitCode != nil &&
		a.skipExitCode != nil && *req.ExitCode == *a.skipExitCode
}

// finishTI writes the completion in one statement: the guarded UPDATE
// (attempt and state as loaded), its event, the run's run_dirty mark and
// the scheduler's wake-up. The agent moves a running TI; any other move
// is a late completion's, and state.Allowed must allow it. A completion
// proves its process started: when the start was not reported (the agent
// waived the start report of a process that exited first, agent/task.go
// waiveStartReport) it records started_at, as completeSuccessSQL does.
func (s *Store) finishTI(ctx context.Context, tx pgx.Tx, a tiAttempt, req Completion,
	to state.TI, reason state.Reason, kind state.EventKind, msg string) (err error) {
	by := state.ActorLateComplete
	if a.state == state.TIRunning {
		by = state.ActorAgent
	}
	if err := checkMove(a.state, to, by); err != nil {
		return err
	}
	var delayUS int64
	if to == state.TIUpForRetry {
		_, d := a.policy.Next(a.tryNumber)
		delayUS = micros(d)
	}
	var nullReason *string
	if reason != "" {
		r := string(reason)
		nullReason = &r
	}
	var outs []byte
	var outBytes int
	if to == state.TISuccess {
		if outs, outBytes, err = outputsArg(req.Outputs); err != nil {
			return err
		}
	}
	var n int
	err = tx.QueryRow(ctx, `
		WITH upd AS (
		  UPDATE task_instances
		     SET state = $3, reason = $4, message = $5, exit_code = $6,
		         started_at = coalesce(started_at, now()),
		         end_date = CASE WHEN $3 = 'up_for_retry' THEN NULL ELSE now() END,
		         next_retry_at = CASE WHEN $3 = 'up_for_retry' THEN now() + $7 * interval '1 microsecond' END,
		         updated_at = now()
		   WHERE id = $1 AND attempt_id = $2::uuid AND state = $8
		  RETURNING id, run_id, task_id, try_number, attempt_id),
		outs AS (`+upsertOutputsSQL+`
		  SELECT id, try_number, $11::jsonb, $12 FROM upd WHERE $11::jsonb IS NOT NULL `+onOutputsConflictSQL+`),
		ev AS (
		  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		  SELECT run_id, id, task_id, try_number, attempt_id, $9, $10, $5 FROM upd),
		dirty AS (
		  INSERT INTO run_dirty (run_id) SELECT run_id FROM upd)
		SELECT count(*), CASE WHEN count(*) > 0 THEN pg_notify('`+ChanScheduler+`', '')::text END FROM upd`,
		a.tiID, req.AttemptID, string(to), nullReason, msg, req.ExitCode, delayUS, string(a.state),
		a.agentID, string(kind), outs, outBytes).Scan(&n, new(*string))
	if err != nil {
		return err
	}
	if n != 1 {
		return &StaleAttemptError{TIID: a.tiID, Reason: state.StopSuperseded}
	}
	return nil
}
