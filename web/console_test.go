package web_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/web"
)

// The console marks an event as a recovery decision from its own list;
// it must name exactly the decisions the scheduler counts (less the
// reapers' error counters, which are no events).
func TestConsoleDecisionsMatchMetrics(t *testing.T) {
	src, err := os.ReadFile("console/ui/decisions.js")
	require.NoError(t, err)
	block := regexp.MustCompile(`(?s)new Set\(\[(.*?)\]\)`).FindSubmatch(src)
	require.NotNil(t, block, "decisions.js declares its Set")
	var js []string
	for _, m := range regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(block[1], -1) {
		js = append(js, string(m[1]))
	}
	var want []string
	for _, d := range metrics.DecisionLabels() {
		if !strings.HasSuffix(d, metrics.DecisionSuffixListError) && !strings.HasSuffix(d, metrics.DecisionSuffixCandidateError) {
			want = append(want, d)
		}
	}
	slices.Sort(js)
	slices.Sort(want)
	assert.Equal(t, want, js)
}

// The page and its modules are served with a policy that allows only
// this origin; other paths and methods are left to the API.
func TestHandlerServesTheConsoleOnly(t *testing.T) {
	h := web.Handler()
	get := func(method, path string) (*httptest.ResponseRecorder, bool) {
		rec := httptest.NewRecorder()
		ok := h(rec, httptest.NewRequest(method, path, nil))
		return rec, ok
	}
	rec, ok := get(http.MethodGet, "/")
	require.True(t, ok)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `<script type="module" src="/ui/app.js">`)
	csp := rec.Header().Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'self'")
	assert.NotContains(t, csp, "unsafe-inline")
	for _, path := range []string{"/ui/app.js", "/ui/style.css", "/ui/pages/run.js"} {
		rec, ok = get(http.MethodGet, path)
		assert.True(t, ok, path)
		assert.Equal(t, http.StatusOK, rec.Code, path)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/nope"}, {http.MethodGet, "/ui/missing.js"}, {http.MethodPost, "/"}, {http.MethodGet, "/v1/runs"},
		{http.MethodGet, "/ui/"}, {http.MethodGet, "/ui/pages/"}, {http.MethodGet, "/ui"},
	} {
		_, ok = get(c.method, c.path)
		assert.False(t, ok, "%s %s is not the console's", c.method, c.path)
	}
}

// No page loads anything from another origin: no CDN, no external font.
func TestConsoleLoadsNothingFromOutside(t *testing.T) {
	files, err := os.ReadDir("console/ui/pages")
	require.NoError(t, err)
	paths := []string{"console/index.html", "console/ui/style.css", "console/ui/app.js", "console/ui/api.js",
		"console/ui/util.js", "console/ui/graph.js", "console/ui/decisions.js", "console/ui/history.js", "console/ui/gantt.js", "console/ui/rerun.js"}
	for _, f := range files {
		paths = append(paths, "console/ui/pages/"+f.Name())
	}
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import\s+url\(\s*["']?https?:|fetch\(\s*["']https?:`)
	for _, p := range paths {
		src, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Nil(t, external.Find(src), "%s refers to another origin", p)
	}
}
