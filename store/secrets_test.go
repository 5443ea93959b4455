package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func testBox(t *testing.T, fill byte) *secrets.Box {
	t.Helper()
	b, err := secrets.NewBox(bytes.Repeat([]byte{fill}, secrets.KeyBytes))
	require.NoError(t, err)
	return b
}

// TestSecretsSetListDelete: a set seals the value for the version it
// writes, the row holds no plaintext, list shows names, versions and
// times only, a delete removes the name, and the count limit refuses a
// new name but not a new version.
func TestSecretsSetListDelete(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	box := testBox(t, 1)
	set := func(name, value string, max int) (store.SecretInfo, bool, error) {
		return e.st.SetSecret(e.ctx, name, max, func(v int64) ([]byte, error) { return box.Seal(name, v, []byte(value)) })
	}
	info, created, err := set("db_password", "first-value", 10)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, int64(1), info.Version)
	assert.Equal(t, info.CreatedAt, info.UpdatedAt)

	info, created, err = set("db_password", "second-value", 10)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, int64(2), info.Version)
	assert.True(t, info.UpdatedAt.After(info.CreatedAt))

	var raw []byte
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT sealed FROM secrets WHERE name = 'db_password'`).Scan(&raw))
	assert.False(t, bytes.Contains(raw, []byte("second-value")), "the stored row holds the value in the clear")
	got, err := e.st.SealedSecrets(e.ctx, []string{"db_password", "nope"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	v, err := box.Open("db_password", got["db_password"].Version, got["db_password"].Sealed)
	require.NoError(t, err)
	assert.Equal(t, "second-value", string(v))
	_, err = box.Open("db_password", 1, got["db_password"].Sealed)
	assert.ErrorIs(t, err, secrets.ErrWrongKey, "the version is bound into the seal")

	_, _, err = set("other", "value", 1)
	var limit *store.SecretLimitError
	require.ErrorAs(t, err, &limit)
	_, _, err = set("db_password", "third-value", 1)
	require.NoError(t, err, "a new version of an existing name is not a new secret")

	spec, err := dag.Parse([]byte("dag_id: s\ntasks:\n  - id: t\n    command: [x]\n    env: {A: {secret: zz}, B: {secret: db_password}, C: {secret: aa}}\n"))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	var missing *store.MissingSecretsError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, []dag.SecretUse{{TaskID: "t", Var: "A", Secret: "zz"}, {TaskID: "t", Var: "C", Secret: "aa"}}, missing.Uses)
	assert.Equal(t, "dag \"s\": task \"t\": env A: secret \"zz\": no such secret (create it with `vigil secrets set zz`)\n"+
		"dag \"s\": task \"t\": env C: secret \"aa\": no such secret (create it with `vigil secrets set aa`)", err.Error())
	_, _, err = e.st.GetDAG(e.ctx, "s")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing was applied")

	list, err := e.st.ListSecrets(e.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "db_password", list[0].Name)
	assert.Equal(t, int64(3), list[0].Version)

	require.NoError(t, e.st.DeleteSecret(e.ctx, "db_password"))
	require.ErrorIs(t, e.st.DeleteSecret(e.ctx, "db_password"), store.ErrNotFound)
	list, err = e.st.ListSecrets(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}

// TestCheckSecretsKey: the first start stores the key check; the same
// key passes later, another key is ErrSecretsKey. A freshly generated key
// (Lite's new data directory) replaces the check only while no secret is
// stored; once one is, it is refused like any other.
func TestCheckSecretsKey(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	check := func(b *secrets.Box, fresh bool) error {
		return e.st.CheckSecretsKey(e.ctx, b.Verifier, b.CheckVerifier, fresh)
	}
	require.NoError(t, check(testBox(t, 1), false))
	require.NoError(t, check(testBox(t, 1), false))
	err := check(testBox(t, 2), false)
	require.ErrorIs(t, err, store.ErrSecretsKey)
	assert.True(t, errors.Is(err, secrets.ErrWrongKey))

	require.NoError(t, check(testBox(t, 2), true), "no secret stored: a new key takes the check over")
	require.ErrorIs(t, check(testBox(t, 1), false), store.ErrSecretsKey, "the old key no longer opens it")
	box := testBox(t, 2)
	_, _, err = e.st.SetSecret(e.ctx, "k", 10, func(v int64) ([]byte, error) { return box.Seal("k", v, []byte("value")) })
	require.NoError(t, err)
	require.ErrorIs(t, check(testBox(t, 3), true), store.ErrSecretsKey, "a stored secret keeps its key")
	require.NoError(t, check(testBox(t, 2), false))
}

// TestClaimSplitsSecretReferences: a claimed TI carries its plain env in
// Env and its secret references, never values, in SecretRefs; the
// secret_missing failure is recorded with its reason.
func TestClaimSplitsSecretReferences(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 1})
	box := testBox(t, 1)
	_, _, err := e.st.SetSecret(e.ctx, "db_password", 10, func(v int64) ([]byte, error) { return box.Seal("db_password", v, []byte("value")) })
	require.NoError(t, err)
	e.apply("dag_id: s\ntasks:\n  - id: t\n    command: [\"true\"]\n    env:\n      PW: {secret: db_password}\n      HOST: db\n")
	e.trigger("s")
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, map[string]string{"HOST": "db"}, tasks[0].Env)
	assert.Equal(t, map[string]string{"PW": "db_password"}, tasks[0].SecretRefs)

	st, _, err := e.st.Complete(e.ctx, agentID, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeFailed,
		Failure: state.FailureSecretMissing, Error: `env PW: secret "db_password" does not exist`})
	require.NoError(t, err)
	assert.Equal(t, state.TIFailed, st)
	var reason, msg string
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT reason, message FROM task_instances WHERE id = $1`, tasks[0].TIID).Scan(&reason, &msg))
	assert.Equal(t, string(state.ReasonSecretMissing), reason)
	assert.Contains(t, msg, `could not start: env PW: secret "db_password" does not exist`)
}
