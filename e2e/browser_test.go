package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/web"
)

// chromiumPath is Debian's Chromium, which make test installs (scripts/deps.sh); the browser
// tests never download one (adr/0021).
const chromiumPath = "/usr/bin/chromium"

// screenshotDir is where the browser tests save a screenshot of every
// page (git ignores it; docs/console-screenshots/ holds a copied set).
var screenshotDir = filepath.Join("..", "web", "test-output", "console")

// stepTimeout bounds one browser step: a page or element that does not
// appear within it fails the test with what was awaited.
const stepTimeout = 30 * time.Second

// browser is one headless Chromium driven over the DevTools protocol,
// with a fresh profile; every JavaScript exception on a page is recorded
// and fails the test at its end.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	_, err := os.Stat(chromiumPath)
	require.NoError(t, err, "the browser tests need Debian's Chromium at %s: make test installs it (scripts/deps.sh)", chromiumPath)
	require.True(t, web.Built(), "the console's graph library is missing from this build: run make web first (make test does)")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			b.mu.Lock()
			b.errors = append(b.errors, e.ExceptionDetails.Error())
			b.mu.Unlock()
		}
	})
	require.NoError(t, chromedp.Run(ctx), "start %s", chromiumPath)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("JavaScript exception on a console page: %s", e)
		}
	})
	require.NoError(t, os.MkdirAll(screenshotDir, 0o755))
	return b
}

// on returns b failing t (a subtest's) instead of the test that started it.
func (b *browser) on(t *testing.T) *browser {
	return &browser{t: t, ctx: b.ctx}
}

// run performs actions within stepTimeout, failing with what.
func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	err := chromedp.Run(ctx, actions...)
	if err != nil {
		// Say what the page showed instead.
		var body string
		dctx, dcancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer dcancel()
		_ = chromedp.Run(dctx, chromedp.Text("body", &body, chromedp.ByQuery))
		b.t.Logf("browser: the page showed, when %q failed:\n%s", what, body)
	}
	require.NoError(b.t, err, "browser: %s", what)
}

// open loads the console route (a hash like "#/runs") of base afresh
// and waits for sel. The query makes every load a full navigation, not
// a same-document hash change racing the page's own routing.
func (b *browser) open(base, route, sel string) {
	b.t.Helper()
	loads.Add(1)
	url := fmt.Sprintf("%s/?load=%d%s", base, loads.Load(), route)
	b.run("open "+route+", wait for "+sel, chromedp.Navigate(url), chromedp.WaitVisible(sel, chromedp.ByQuery))
}

// loads numbers the page loads of open.
var loads atomic.Int64

// waitFor waits until sel is in the page (visible or not).
func (b *browser) waitFor(what, sel string) {
	b.t.Helper()
	b.run(what, chromedp.WaitReady(sel, chromedp.ByQuery))
}

// text returns the text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.TextContent(sel, &s, chromedp.ByQuery))
	return s
}

// count is the number of elements matching sel.
func (b *browser) count(sel string) int {
	b.t.Helper()
	var n int
	b.eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, sel), &n)
	return n
}

// shot saves a full-page PNG named name under screenshotDir.
func (b *browser) shot(name string) {
	b.t.Helper()
	var png []byte
	b.run("screenshot "+name, chromedp.Sleep(300*time.Millisecond), chromedp.FullScreenshot(&png, 100))
	require.NoError(b.t, os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644))
}

// eval runs an async JavaScript expression in the page and stores its
// result in out.
func (b *browser) eval(js string, out any) {
	b.t.Helper()
	b.run("evaluate "+js, chromedp.Evaluate(js, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
}

// signIn signs in through the console's form with token and waits until
// the page says which identity it is ("operator" and "viewer" for the
// built-in tokens).
func (b *browser) signIn(base, token, identity string) {
	b.t.Helper()
	b.open(base, "", "#token")
	b.run("sign in as "+identity,
		chromedp.SendKeys("#token", token, chromedp.ByQuery),
		chromedp.Click(`#signin button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(fmt.Sprintf(`[data-identity=%q]`, identity), chromedp.ByQuery))
}

// cliOK runs the CLI against lite as the operator and fails unless it
// exits 0.
func cliOK(t *testing.T, lite *liteProc, args ...string) string {
	t.Helper()
	out, code := cli(t, lite, args...)
	require.Equal(t, 0, code, "vigil %s: %s", strings.Join(args, " "), out)
	return out
}

// chromiumVersion is for the test log: which browser ran.
func chromiumVersion() string {
	out, err := exec.Command(chromiumPath, "--version").Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

func setValue(sel, v string) chromedp.Action { return chromedp.SetValue(sel, v, chromedp.ByQuery) }
func clickSel(sel string) chromedp.Action    { return chromedp.Click(sel, chromedp.ByQuery) }
func waitVisible(sel string) chromedp.Action { return chromedp.WaitVisible(sel, chromedp.ByQuery) }
func attr(sel, name string, out *string) chromedp.Action {
	return chromedp.AttributeValue(sel, name, out, nil, chromedp.ByQuery)
}

// colorScheme makes the page see the system's colour scheme as scheme
// (light or dark), as prefers-color-scheme does.
func colorScheme(scheme string) chromedp.Action {
	return emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}})
}
