package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// viewerToken is the read-only token e2e Lites are given with
// --viewer-token-file.
const viewerToken = "e2e-viewer-token"

// A real Lite with a viewer token from a file: `vigil at-risk` lists a
// queued task no agent can take, with the missing tag, for the viewer;
// the viewer's `vigil runs cancel` is refused by the API (403, exit 1)
// and the run goes on.
func TestViewerAtRiskAndCannotCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeDAG(t, dir, "gpu.yaml", "dag_id: gpu\ntasks:\n  - id: train\n    command: [\"true\"]\n    tags: [gpu]\n")
	tokenFile := filepath.Join(dir, "viewer.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(viewerToken+"\n"), 0o600))
	lite := startLite(t, liteOpts{DAGs: dir, Agents: 1, Extra: []string{"--viewer-token-file", tokenFile}})
	run, code := triggerJSON(t, lite, "gpu", false)
	require.Equal(t, 0, code)

	viewer := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + viewerToken}
	var risk protocol.AtRisk
	waitFor(t, 20*time.Second, func() bool {
		r := runVigil(t, viewer, "at-risk", "-o", "json")
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &risk) != nil {
			return false
		}
		return len(risk.Queued) == 1
	}, "vigil at-risk lists the queued gpu task")
	assert.Equal(t, run.ID, risk.Queued[0].RunID)
	assert.Equal(t, []string{"gpu"}, risk.Queued[0].MissingTags)
	assert.Greater(t, risk.Queued[0].TimeLeft.D(), time.Duration(0), "listed before dispatch-lost acts")
	table := runVigil(t, viewer, "at-risk")
	require.Equal(t, 0, table.Code, table.Stderr)
	assert.Contains(t, table.Stdout, "missing tags gpu")

	r := runVigil(t, viewer, "runs", "cancel", strconv.FormatInt(run.ID, 10))
	assert.Equal(t, 1, r.Code, "the viewer cannot cancel: %s", r.Stdout)
	assert.Contains(t, r.Stderr, "viewer role is read-only")
	assert.NotEqual(t, "cancelled", runDetail(t, lite, run.ID).State)
}
