package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// TestMaskerLongestFirst: every delivered value is masked in a line, a
// value holding another is masked whole, and no secrets means no masker.
func TestMaskerLongestFirst(t *testing.T) {
	t.Parallel()
	m := newMasker(map[string]string{"A": "pass", "B": "password123", "C": "pass", "D": ""})
	require.NotNil(t, m)
	assert.Equal(t, "user=*** pw=*** again *** end", m.Replace("user=pass pw=password123 again pass end"))
	assert.Equal(t, "nothing here", m.Replace("nothing here"))
	assert.Nil(t, newMasker(nil))
	assert.Nil(t, newMasker(map[string]string{"E": ""}))
}

// TestTaskEnvSecrets: a secret sets its variable over the task's plain
// env of the same name, and the identity variables still win.
func TestTaskEnvSecrets(t *testing.T) {
	t.Parallel()
	env := taskEnv(nil, nil, nil, protocol.ClaimedTask{
		Attempt: protocol.Attempt{TIID: 5, AttemptID: "a-1"}, RunID: 3, DAGID: "d", TaskID: "x", TryNumber: 1,
		Env:     map[string]string{"HOST": "db", "PW": "plain"},
		Secrets: map[string]string{"PW": "from-secret", "VIGIL_RUN_ID": "99"},
	}, "")
	assert.Contains(t, env, "PW=from-secret")
	assert.NotContains(t, env, "PW=plain")
	assert.Contains(t, env, "HOST=db")
	assert.Contains(t, env, "VIGIL_RUN_ID=3")
}

// TestSecretReachesTheTaskMaskedInItsLog: a real agent runs a task that
// was claimed with a secret: the task reads the value from its
// environment (and writes it to a file), and every shipped line that held
// it, on stdout and stderr, holds *** instead; a value split across two
// lines by the task is not masked, as documented.
func TestSecretReachesTheTaskMaskedInItsLog(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	out := filepath.Join(t.TempDir(), "got")
	const value = "hunter2-secret"
	f.mu.Lock()
	f.nextTI++
	task := protocol.ClaimedTask{
		Attempt: protocol.Attempt{TIID: f.nextTI, AttemptID: "3f1c1f2e-0000-4000-8000-000000000001"},
		RunID:   7, DAGID: "etl", TaskID: "secret", TryNumber: 1,
		Command: sh(`printf %s "$PW" > "$OUT"; echo "pw=$PW"; echo "err $PW$PW" >&2; printf 'hunter2\n-secret\n'`),
		Env:     map[string]string{"OUT": out},
		Secrets: map[string]string{"PW": value},
	}
	f.queue = append(f.queue, task)
	f.mu.Unlock()

	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, value, string(got), "the task got the value")
	lines := f.lines(task.AttemptID)
	assert.True(t, containsLine(lines, "stdout", "pw=***"), "%+v", lines)
	assert.True(t, containsLine(lines, "stderr", "err ******"), "%+v", lines)
	assert.True(t, containsLine(lines, "stdout", "hunter2") && containsLine(lines, "stdout", "-secret"),
		"a value split across lines is not masked: %+v", lines)
	for _, l := range lines {
		assert.NotContains(t, l.Line, value)
	}
}
