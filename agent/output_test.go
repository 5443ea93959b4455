package agent

import (
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// TestOutputsShipWithTheSuccess: what a task appends to $VIGIL_OUTPUT,
// both forms, reaches the server with its success; the inputs of the
// claim reach the task; an output holding a secret's value is not sent,
// and the log says so without the value; the file is gone afterwards.
func TestOutputsShipWithTheSuccess(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	const secret = "hunter2-secret"
	f.mu.Lock()
	f.nextTI++
	task := protocol.ClaimedTask{
		Attempt: protocol.Attempt{TIID: f.nextTI, AttemptID: uuid.NewString()},
		RunID:   7, DAGID: "etl", TaskID: "out", TryNumber: 1,
		Command: sh(`echo "count=$VIGIL_INPUT_UP_N" >> "$VIGIL_OUTPUT"
printf 'msg<<EOF\nline 1\nline 2\nEOF\n' >> "$VIGIL_OUTPUT"
echo "leak=x${PW}x" >> "$VIGIL_OUTPUT"
echo "$VIGIL_OUTPUT"`),
		Secrets: map[string]string{"PW": secret},
		Inputs:  map[string]string{"VIGIL_INPUT_UP_N": "41"},
	}
	f.queue = append(f.queue, task)
	f.mu.Unlock()

	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	assert.Equal(t, map[string]string{"count": "41", "msg": "line 1\nline 2"}, c.Outputs)
	lines := f.lines(task.AttemptID)
	assert.True(t, containsLine(lines, "system", "--- output leak not sent: its key or value contains the value of a secret ---"), "%+v", lines)
	for _, l := range lines {
		assert.NotContains(t, l.Line, secret)
		if l.Stream == "stdout" {
			_, err := os.Stat(l.Line)
			assert.ErrorIs(t, err, os.ErrNotExist, "the VIGIL_OUTPUT file %s is removed", l.Line)
		}
	}
}

// TestAnOutputFileIsTheTasksToCreate: a task that runs as the agent's
// user finds no file at $VIGIL_OUTPUT (the agent creates none, an inode
// per attempt that most tasks never write), under a name of 128 random
// bits in the agent's task directory; a success that writes nothing
// ships no outputs and no error, and one that creates the file with >
// ships what it wrote.
func TestAnOutputFileIsTheTasksToCreate(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	quiet := f.enqueue(0, nil, sh(`[ -e "$VIGIL_OUTPUT" ] && echo exists || echo absent; basename "$VIGIL_OUTPUT"`)...)
	writes := f.enqueue(0, nil, sh(`echo "k=v" > "$VIGIL_OUTPUT"`)...)

	c := f.waitCompletion(quiet.AttemptID, 10*time.Second)
	require.Equal(t, state.OutcomeSuccess, c.Outcome, "%+v", c)
	assert.Empty(t, c.Outputs)
	assert.Empty(t, c.Error)
	var got []string
	for _, l := range f.lines(quiet.AttemptID) {
		got = append(got, l.Line)
	}
	require.Len(t, got, 2, "%q", got)
	assert.Equal(t, "absent", got[0])
	assert.Regexp(t, `^output-[0-9a-f]{32}$`, got[1])

	c = f.waitCompletion(writes.AttemptID, 10*time.Second)
	require.Equal(t, state.OutcomeSuccess, c.Outcome, "%+v", c)
	assert.Equal(t, map[string]string{"k": "v"}, c.Outputs)
}

// TestOutputsOverTheLimitFailTheTry: a task that exits 0 but writes more
// than 64 KiB of outputs fails output_too_large, the message giving the
// size and the limit, and sends no outputs; a file not in the format
// fails output_invalid naming the line; a failed task's file is not read.
func TestOutputsOverTheLimitFailTheTry(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	big := f.enqueue(0, nil, sh(`head -c 65536 /dev/zero | tr '\0' v | sed 's/^/k=/' >> "$VIGIL_OUTPUT"`)...)
	huge := f.enqueue(0, nil, sh(`head -c 2000000 /dev/zero | tr '\0' v >> "$VIGIL_OUTPUT"`)...)
	bad := f.enqueue(0, nil, sh(`echo "ok=1" >> "$VIGIL_OUTPUT"; echo "not an output" >> "$VIGIL_OUTPUT"`)...)
	failed := f.enqueue(0, nil, sh(`echo "not an output" >> "$VIGIL_OUTPUT"; exit 3`)...)

	c := f.waitCompletion(big.AttemptID, 10*time.Second)
	assert.Equal(t, state.OutcomeFailed, c.Outcome)
	assert.Equal(t, state.FailureOutputTooLarge, c.Failure)
	assert.Equal(t, "outputs are 65537 bytes of keys and values, over the limit of 65536 bytes per task instance", c.Error)
	assert.Nil(t, c.Outputs)
	require.NotNil(t, c.ExitCode)
	assert.Equal(t, 0, *c.ExitCode, "the process itself exited 0")

	c = f.waitCompletion(huge.AttemptID, 10*time.Second)
	assert.Equal(t, state.FailureOutputTooLarge, c.Failure)
	assert.Contains(t, c.Error, "the VIGIL_OUTPUT file is 2000000 bytes, over its limit of 1048576 bytes")

	c = f.waitCompletion(bad.AttemptID, 10*time.Second)
	assert.Equal(t, state.FailureOutputInvalid, c.Failure)
	assert.Equal(t, `VIGIL_OUTPUT line 2: "not an output": must be key=value or key<<DELIMITER`, c.Error)
	assert.True(t, containsLine(f.lines(bad.AttemptID), "system", `--- outputs refused (output_invalid): VIGIL_OUTPUT line 2: "not an output": must be key=value or key<<DELIMITER ---`))

	c = f.waitCompletion(failed.AttemptID, 10*time.Second)
	assert.Empty(t, c.Failure)
	assert.Equal(t, "exit status 3", c.Error)
}

// TestOutputsOfATaskUser: with --task-user the VIGIL_OUTPUT file belongs
// to the task's user, mode 0600, and the task can neither list the
// directory that holds it (and so reach another attempt's file) nor
// replace its own with a link to a file only root may read, which the
// agent, as root, would otherwise read back as outputs.
func TestOutputsOfATaskUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, func(c *Config) { c.TaskUser = "nobody" })
	task := f.enqueue(0, nil, sh(`stat -c '%U %a' "$VIGIL_OUTPUT"
ls "$(dirname "$VIGIL_OUTPUT")" >/dev/null 2>&1 || echo cannot-list
ln -sf /etc/shadow "$VIGIL_OUTPUT" 2>/dev/null || echo cannot-replace
echo "who=$(id -un)" >> "$VIGIL_OUTPUT"`)...)
	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	require.Equal(t, state.OutcomeSuccess, c.Outcome, "%+v", c)
	assert.Equal(t, map[string]string{"who": "nobody"}, c.Outputs)
	var got []string
	for _, l := range f.lines(task.AttemptID) {
		got = append(got, l.Line)
	}
	assert.Equal(t, []string{"nobody 600", "cannot-list", "cannot-replace"}, got)
}
