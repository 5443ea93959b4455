package api

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// TestValidateFailure checks the optional failure and signal fields of a
// completion: each rule is named in the error.
func TestValidateFailure(t *testing.T) {
	t.Parallel()
	failed := state.OutcomeFailed
	for _, ok := range []protocol.CompleteRequest{
		{Outcome: failed},
		{Outcome: state.OutcomeSuccess},
		{Outcome: failed, Failure: state.FailureAgentShutdown},
		{Outcome: failed, Failure: state.FailureStartFailed},
		{Outcome: failed, Failure: state.FailureSignal, Signal: "SIGKILL"},
		{Outcome: failed, Failure: state.FailureSignal, Signal: "SIG34"},
	} {
		assert.NoError(t, validateFailure(ok), "%+v", ok)
	}
	for want, bad := range map[string]protocol.CompleteRequest{
		`failure: "oom" must be empty or one of`:                  {Outcome: failed, Failure: "oom"},
		`failure: "signal" is allowed only with outcome "failed"`: {Outcome: state.OutcomeSuccess, Failure: state.FailureSignal, Signal: "SIGKILL"},
		`signal: required with failure "signal"`:                  {Outcome: failed, Failure: state.FailureSignal},
		`signal: allowed only with failure "signal"`:              {Outcome: failed, Signal: "SIGKILL"},
		`signal: "kill" must be a signal name`:                    {Outcome: failed, Failure: state.FailureSignal, Signal: "kill"},
	} {
		err := validateFailure(bad)
		if assert.Error(t, err, "%+v", bad) {
			assert.Contains(t, err.Error(), want)
		}
	}
}
