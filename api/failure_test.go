package api

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestValidateFailure checks the optional failure and signal fields of a
// completion: each rule is named in the error.
func TestValidateFailure(t *testing.T) {
	t.Parallel()
	failed := protocol.OutcomeFailed
	for _, ok := range []protocol.CompleteRequest{
		{Outcome: failed},
		{Outcome: protocol.OutcomeSuccess},
		{Outcome: failed, Failure: protocol.FailureAgentShutdown},
		{Outcome: failed, Failure: protocol.FailureStartFailed},
		{Outcome: failed, Failure: protocol.FailureSignal, Signal: "SIGKILL"},
		{Outcome: failed, Failure: protocol.FailureSignal, Signal: "SIG34"},
	} {
		assert.NoError(t, validateFailure(ok), "%+v", ok)
	}
	for want, bad := range map[string]protocol.CompleteRequest{
		`failure: "oom" must be empty or one of`:                  {Outcome: failed, Failure: "oom"},
		`failure: "signal" is allowed only with outcome "failed"`: {Outcome: protocol.OutcomeSuccess, Failure: protocol.FailureSignal, Signal: "SIGKILL"},
		`signal: required with failure "signal"`:                  {Outcome: failed, Failure: protocol.FailureSignal},
		`signal: allowed only with failure "signal"`:              {Outcome: failed, Signal: "SIGKILL"},
		`signal: "kill" must be a signal name`:                    {Outcome: failed, Failure: protocol.FailureSignal, Signal: "kill"},
	} {
		err := validateFailure(bad)
		if assert.Error(t, err, "%+v", bad) {
			assert.Contains(t, err.Error(), want)
		}
	}
}
