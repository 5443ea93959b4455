package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestIdentitiesRolesAndAudit runs Lite with a users file (issue 26):
// alice (operator) triggers and cancels a run, and the run's timeline and
// `vigil audit list` name her; vera (viewer) cannot create a webhook and
// alice cannot reset the fence (403 naming the role); both refusals are
// in the audit log as refused; only the admin reads the log; whoami says
// who each token is.
func TestIdentitiesRolesAndAudit(t *testing.T) {
	t.Parallel()
	alice, vera, ada := "alice-"+randomHex(12), "vera-"+randomHex(12), "ada-"+randomHex(12)
	users := filepath.Join(t.TempDir(), "users.yaml")
	require.NoError(t, os.WriteFile(users, []byte(fmt.Sprintf(
		"- name: alice\n  role: operator\n  token_sha256: %s\n- name: vera\n  role: viewer\n  token_sha256: %s\n- name: ada\n  role: admin\n  token_sha256: %s\n",
		sha256Hex(alice), sha256Hex(vera), sha256Hex(ada))), 0o644))
	dags := t.TempDir()
	writeDAG(t, dags, "ident", "dag_id: ident\ntasks:\n  - id: t\n    command: [\"true\"]\n")
	lite := startLite(t, liteOpts{DAGs: dags, Extra: []string{"--users-file", users}})
	as := func(token string, args ...string) cliResult {
		t.Helper()
		return runVigil(t, []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + token}, args...)
	}

	r := as(alice, "whoami", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var who protocol.Session
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &who))
	assert.Equal(t, protocol.Session{Name: "alice", Role: "operator", Auth: "bearer", ViewerConfigured: who.ViewerConfigured}, who)

	// Lite has no agents: the run stays queued until alice cancels it.
	r = as(alice, "runs", "trigger", "ident", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var run protocol.Run
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &run))
	r = as(alice, "runs", "cancel", strconv.FormatInt(run.ID, 10))
	require.Equal(t, 0, r.Code, r.Stderr)
	var messages []string
	for _, ev := range runEvents(t, lite, run.ID) {
		messages = append(messages, string(ev.Kind)+": "+ev.Message)
	}
	assert.Contains(t, messages, "run_cancelled: cancelled by alice", "the run's timeline names the actor")

	r = as(vera, "webhooks", "set", "oncall", "--url", "http://127.0.0.1:9/hook")
	assert.NotEqual(t, 0, r.Code)
	assert.Contains(t, r.Stderr, "needs the admin role; vera has the viewer role")
	r = as(alice, "fence", "reset", "--reason", "drill", "--yes")
	assert.NotEqual(t, 0, r.Code)
	assert.Contains(t, r.Stderr, "needs the admin role; alice has the operator role")
	r = as(alice, "audit", "list")
	assert.NotEqual(t, 0, r.Code, "only an admin reads the audit log")

	audit := func(args ...string) []protocol.AuditRecord {
		t.Helper()
		r := as(ada, append([]string{"audit", "list", "-o", "json"}, args...)...)
		require.Equal(t, 0, r.Code, r.Stderr)
		var page protocol.AuditList
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &page), r.Stdout)
		return page.Records
	}
	cancel := audit("--actor", "alice", "--target", fmt.Sprintf("runs/%d/cancel", run.ID))
	require.Len(t, cancel, 1, "alice's cancel is in the audit log")
	assert.Equal(t, "POST /v1/runs/{run_id}/cancel", cancel[0].Route)
	assert.Equal(t, "ok", cancel[0].Result)
	assert.Equal(t, "operator", cancel[0].Role)
	assert.NotEmpty(t, cancel[0].RequestID)

	refused := audit("--actor", "vera", "--since", "1h")
	require.Len(t, refused, 1, "vera's refused webhook is in the audit log")
	assert.Equal(t, "PUT /v1/webhooks/{name}", refused[0].Route)
	assert.Equal(t, "refused", refused[0].Result)
	assert.Equal(t, 403, refused[0].Status)
	fence := audit("--actor", "alice", "--target", "fence")
	require.Len(t, fence, 1)
	assert.Equal(t, "refused", fence[0].Result)

	// The admin may: the reset is audited in its own transaction.
	r = as(ada, "fence", "reset", "--reason", "drill", "--yes")
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "fence reset by ada")
	fence = audit("--actor", "ada", "--target", "fence")
	require.Len(t, fence, 1)
	assert.Equal(t, "ok", fence[0].Result)
	assert.Equal(t, "drill", fence[0].Message)

	// The console: ada, an admin, reads the audit log on its page; alice
	// signed in sees no Audit page in the menu.
	b := startBrowser(t)
	b.signIn(lite.URL, ada, "ada")
	assert.Contains(t, b.text("#who"), "signed in as ada (admin)")
	b.open(lite.URL, "#/audit", `#audit tr[data-result="refused"]`)
	assert.Positive(t, b.count(fmt.Sprintf(`#audit tr[data-audit="%d"]`, cancel[0].ID)), "alice's cancel is on the page")
	b.run("sign out", chromedp.Click("#signout", chromedp.ByQuery), chromedp.WaitVisible("#token", chromedp.ByQuery))
	b.signIn(lite.URL, alice, "alice")
	var hidden bool
	b.eval(`document.querySelector('nav a[data-nav="audit"]').hidden`, &hidden)
	assert.True(t, hidden, "the Audit page is the admin's")
}
