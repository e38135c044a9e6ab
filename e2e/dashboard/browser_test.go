package dashboard_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/dashboard"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/queue"
	"github.com/sluice-go/sluice/tenant"
)

// The browser test's flags: -screenshot writes the page's picture there
// (docs/img/dashboard.png is made with
// `go test ./e2e/dashboard -run Browser -screenshot ../../docs/img/dashboard.png -browser-load 40s`),
// -browser-load sets how long the load runs before the picture.
var (
	screenshotPath = flag.String("screenshot", "", "write the browser test's screenshot to this PNG file")
	browserLoad    = flag.Duration("browser-load", 0, "how long the browser test loads the server before its screenshot (0: just long enough for the checks)")
)

// chromium returns the path of a Chromium to drive, or skips the test
// (fails it under CI=true) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("SLUICE_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const install = "Chromium not found: install it with `apt-get install -y chromium` (or set SLUICE_CHROMIUM to its path)"
	if os.Getenv("CI") == "true" {
		t.Fatal(install + " (CI=true: the browser test must run)")
	}
	t.Skip(install)
	return ""
}

// load sends requests to url from conns clients, each one after the other,
// as tenants in the proportions of mix, until ctx ends; every request
// ends within a second.
func load(ctx context.Context, url string, conns int, mix []string) {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	defer c.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for n := i; ctx.Err() == nil; n++ {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return
				}
				req.Header.Set("X-Tenant", mix[n%len(mix)])
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					// A rejection says to come back later: wait a little, as
					// a client would, rather than spin.
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
		})
	}
	wg.Wait()
}

// The page in a real browser, against a server under load (loopback,
// bounded in time): its charts update, the tenants and lanes show, a
// control changes the server, the console stays clean, and a screenshot
// is taken.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	interval := 250 * time.Millisecond
	if *browserLoad > 0 {
		interval = time.Second
	}

	// An I/O-bound weather service (1 ms of CPU, 10 ms of database) on two
	// workers, behind the busy gate and the timed queue, with three
	// tenants, the heaviest of which the controller drops.
	busy := gatetest.Busy(t, gate.BusyConfig{})
	tracker, err := tenant.New(tenant.Config{})
	require.NoError(t, err)
	srv := testServer(t, sluice.Config{Admission: admit.Config{
		MaxAge:   50 * time.Millisecond,
		Policies: []admit.Policy{tracker},
		Gates:    []admit.Policy{busy},
		Queue:    &admit.QueueConfig{Order: queue.CoDel},
	}}, weather.Handler(weather.Config{CPU: time.Millisecond, DB: 10 * time.Millisecond}))
	ctrl, err := tenant.NewController(tenant.ControllerConfig{})
	require.NoError(t, err)
	agent, err := tenant.NewAgent(tenant.AgentConfig{Store: tenant.NewMemoryStore(nil), Tracker: tracker, Controller: ctrl, Period: 500 * time.Millisecond})
	require.NoError(t, err)

	d, err := dashboard.New(dashboard.Config{
		Server: srv, Tenants: tracker, Title: "weather", Interval: interval, Controls: true,
		Knobs: []dashboard.Knob{dashboard.BusyKnob(busy, srv.Runtime().NumWorkers()), dashboard.MaxAgeKnob(srv.Server().Pipeline())},
	})
	require.NoError(t, err)
	defer d.Close()
	mux := http.NewServeMux()
	mux.Handle("/debug/sluice/", d)
	ts := httptest.NewServer(mux)
	defer ts.Close()

	ctx, stop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer func() { stop(); bg.Wait() }()
	bg.Go(func() { _ = agent.Run(ctx) })
	mix := []string{"acme", "acme", "acme", "acme", "acme", "globex", "globex", "initech"}
	bg.Go(func() { load(ctx, "http://"+srv.Addr().String()+"/forecast?city=Lisbon", 16, mix) })

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1500),
	)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	tab, cancelTimeout := context.WithTimeout(tab, 60*time.Second+*browserLoad)
	defer cancelTimeout()

	// Start the browser, and listen to the console before the page loads.
	require.NoError(t, chromedp.Do(tab))
	messages := chromedp.Console(tab)
	var mu sync.Mutex
	var console []string
	var listening sync.WaitGroup
	listening.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, m.String()+" ("+m.URL+")")
			mu.Unlock()
		}
	})
	defer listening.Wait()
	defer cancelTab()

	url := ts.URL + "/debug/sluice/"
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(url)))
	samples := func(n int) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](fmt.Sprintf("Number(document.body.dataset.samples || 0) >= %d", n),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))
	}
	if err := chromedp.Do(tab, samples(3)); err != nil {
		st, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#status').textContent + ' samples=' + document.body.dataset.samples`))
		mu.Lock()
		t.Fatalf("the page shows no samples: %v; the page says %q; the console: %q", err, st, console)
	}

	// The charts update: each one is drawn again, with more points.
	type chartState struct{ Draws, Points int }
	read := func() map[string]chartState {
		out, err := chromedp.Run(tab, chromedp.Evaluate[map[string]chartState](`Object.fromEntries(
			[...document.querySelectorAll('canvas.chart')].map(c => [c.id, {Draws: Number(c.dataset.draws || 0), Points: Number(c.dataset.points || 0)}]))`))
		require.NoError(t, err)
		return out
	}
	before := read()
	require.Len(t, before, 6)
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](`Number(document.body.dataset.samples)`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tab, samples(n+3)))
	after := read()
	for id, b := range before {
		a := after[id]
		assert.Greater(t, a.Draws, b.Draws, "%s is drawn again", id)
		if id != "chart-lanes" || b.Points > 0 {
			assert.Greater(t, a.Points, b.Points, "%s has more points", id)
		}
	}

	text := func(sel string) string {
		s, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	assert.Equal(t, "live", text("#status"))
	assert.Contains(t, text("#big-workers"), "/ 2 busy")
	assert.Contains(t, text("#agebadge"), "ms")
	assert.Contains(t, text("#table-lanes"), "upstream")
	assert.NotEqual(t, "—", text("#big-requests"))
	require.NoError(t, chromedp.Do(tab, chromedp.Poll[chromedp.Void](`document.querySelector('#table-tenants').textContent.includes('acme')`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))), "the tenants' table fills")

	if *browserLoad > 0 {
		select {
		case <-time.After(*browserLoad):
		case <-tab.Done():
		}
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG")
	assert.Greater(t, len(png), 20<<10, "a page with something on it")
	path := *screenshotPath
	if path == "" {
		path = filepath.Join(t.TempDir(), "dashboard.png")
	}
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)

	// A control: the busy gate's limit, from 1 worker to 2.
	require.Equal(t, 1, busy.Limit())
	// The page redraws its controls as data comes in: a click that lands
	// on a control being replaced is lost, so it is tried again.
	var clickErr error
	for range 5 {
		clickErr = chromedp.Do(tab,
			chromedp.SetValue(chromedp.CSS("#knob-0"), "2"),
			chromedp.Click(chromedp.CSS("#knob-0 ~ button")),
			chromedp.Poll[chromedp.Void](`document.querySelector('#control-result').textContent.includes('→ 2')`,
				chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)),
		)
		if clickErr == nil || busy.Limit() == 2 {
			break
		}
	}
	require.Equal(t, 2, busy.Limit(), "the control changed the gate (%v)", clickErr)

	cancelTab()
	listening.Wait()
	mu.Lock()
	defer mu.Unlock()
	var bad []string
	for _, m := range console {
		if !strings.HasPrefix(m, "log:") && !strings.HasPrefix(m, "info:") && !strings.HasPrefix(m, "debug:") {
			bad = append(bad, m)
		}
	}
	assert.Empty(t, bad, "the console has errors or warnings")
}
