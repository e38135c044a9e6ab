//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
)

// The lanes scenario, short: every part on sluice, the parts without a lane
// on net/http, each with its figures filled in and the live change made.
// Nothing here is a timing threshold: the run is too short and the machine
// shared.
func TestSuiteLanes(t *testing.T) {
	cfg := tinySuite()
	cfg.Targets = []string{"nethttp", "sluice"}
	cfg.Scenarios = []Scenario{builtIn(ScenarioLanes)}
	cfg.Duration = 800 * time.Millisecond
	cfg.Lanes = LanesConfig{Batch: 4 * time.Millisecond, Slice: 500 * time.Microsecond, Multiple: 0.3}
	var progress progressLog
	cfg.Progress = progress.record
	rep, err := RunSuite(context.Background(), cfg)
	require.NoError(t, err)
	progress.check(t)
	cpus, err := srt.AffinityCPUs()
	require.NoError(t, err)

	type key struct{ target, part string }
	var got []key
	for _, s := range rep.Samples {
		require.NotNil(t, s.Lanes)
		li := s.Lanes
		what := s.Target + " " + li.Part
		got = append(got, key{s.Target, li.Part})
		assert.Equal(t, ScenarioLanes, s.Scenario, what)
		assert.Equal(t, LanesShape, s.Shape, what)
		assert.Equal(t, DefaultLanesInteractive, s.Handler.CPU, what)
		assert.Positive(t, s.Capacity, what)
		assert.Equal(t, 0.3, s.Multiple, what)
		assert.InEpsilon(t, 0.3*s.Capacity, s.Rates.Offered, 0.5, what)
		assert.Equal(t, len(cpus), li.Workers, "%s: one per CPU, shared with the generator", what)
		assert.Equal(t, 4*time.Millisecond, li.Batch, what)
		assert.Equal(t, DefaultLanesWindow, li.Window, what)
		// The interactive route is served, and counted both ways.
		assert.Positive(t, s.Rates.Goodput, what)
		assert.Positive(t, li.InteractiveDone, what)
		assert.Positive(t, li.InteractiveShare, what)
		assert.Positive(t, li.TargetInteractiveShare, what)
		require.Len(t, li.Series, int(cfg.Duration/li.Window), what)
		assert.True(t, li.HostCPU == -1 || li.HostCPU > 0, "%s: host CPU %v", what, li.HostCPU)
		assert.GreaterOrEqual(t, li.OtherCPU, 0.0, what)
		for _, sh := range []float64{li.BatchShare, li.InteractiveShare, li.TargetBatchShare, li.TargetInteractiveShare} {
			assert.True(t, sh >= 0 && sh < 2, "%s: share %v", what, sh)
		}
		if li.Part == LanesAlone {
			assert.Zero(t, li.BatchRate, what)
			assert.Zero(t, li.BatchDone, what)
			assert.Zero(t, li.TargetBatchShare, what)
		} else {
			assert.InEpsilon(t, 2*float64(li.Workers)/0.004, li.BatchRate, 1e-9, what)
			assert.Equal(t, DefaultLanesConnsPerWorker*li.Workers, li.BatchConns, what)
			assert.Positive(t, li.BatchOffered, what)
			assert.Positive(t, li.BatchDone, "%s: the batch completes requests", what)
			assert.Positive(t, li.BatchShare, what)
			assert.Positive(t, li.TargetBatchShare, what)
		}
		switch li.Part {
		case LanesInBackground, LanesLive:
			assert.Equal(t, uint32(DefaultLanesShares), li.Shares, what)
			assert.Equal(t, int32(DefaultLanesPriority), li.Priority, what)
		default:
			assert.Zero(t, li.Shares, what)
		}
		if s.Target == "sluice" {
			require.NotNil(t, s.Placement, what)
			assert.Equal(t, li.Workers, s.Placement.Workers, what)
		}
		if li.Part != LanesLive {
			assert.Nil(t, li.Change, what)
			continue
		}
		assert.Equal(t, uint32(DefaultLanesLiveShares), li.LiveShares, what)
		require.NotNil(t, li.Change, what)
		c := li.Change
		assert.True(t, c.OK, "%s: %+v", what, c)
		assert.GreaterOrEqual(t, c.At, cfg.Duration/2, what)
		assert.Less(t, c.At, cfg.Duration, what)
		var before, after int
		for _, w := range li.Series {
			switch {
			case w.Start+li.Window <= c.At:
				before++
			case w.Start >= c.At:
				after++
			}
		}
		assert.GreaterOrEqual(t, before, 2, "%s: windows before the change", what)
		assert.GreaterOrEqual(t, after, 2, "%s: windows after the change", what)
	}
	assert.Equal(t, []key{
		{"nethttp", LanesOneLane}, {"nethttp", LanesAlone},
		{"sluice", LanesOneLane}, {"sluice", LanesInBackground}, {"sluice", LanesLive}, {"sluice", LanesAlone},
	}, got)
}

func TestLanesConfigDefaults(t *testing.T) {
	var c LanesConfig
	require.NoError(t, c.defaults())
	assert.Equal(t, LanesConfig{
		Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Slice: 500 * time.Microsecond,
		Multiple: 0.8, BatchMultiple: 2, Priority: 2, Shares: 11, LiveShares: 100, Window: 100 * time.Millisecond,
	}, c)
	assert.Equal(t, 8, c.batchConns(2))
	c.BatchConns = 3
	assert.Equal(t, 3, c.batchConns(2))

	for _, bad := range []LanesConfig{
		{Multiple: -1},
		{BatchMultiple: -2},
		{Batch: time.Millisecond, Slice: 2 * time.Millisecond},
		{Shares: lanes.MaxShares + 1},
		{Window: -time.Second},
	} {
		assert.Error(t, bad.defaults(), "%+v", bad)
	}
}

// Targets without lanes run the parts without a lane only.
func TestLanesPointsRunOn(t *testing.T) {
	for _, part := range LanesParts {
		p := planned{builtIn(ScenarioLanes), Point{Part: part}}
		assert.True(t, p.runsOn("sluice"), part)
		assert.True(t, p.runsOn("sluice-half"), part)
		assert.Equal(t, part == LanesOneLane || part == LanesAlone, p.runsOn("nethttp"), part)
	}
	assert.True(t, planned{offer{}, Point{}}.runsOn("nethttp"), "a scenario without a filter runs on every target")
}

// The shares and series come from the completions at the generator and
// from the target's log, each in the window it ended in.
func TestLanesInfoFill(t *testing.T) {
	const w = 100 * time.Millisecond
	series := func(done ...int64) []Bucket {
		out := make([]Bucket, len(done))
		for i, d := range done {
			out[i] = Bucket{Start: time.Duration(i) * w, Completed: d}
		}
		return out
	}
	ires := &Result{Duration: 4 * w, Series: series(100, 80, 60, 40)}
	bres := &Result{Offered: 70, Duration: 4 * w, Series: series(1, 2, 3, 4)}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The target's log began 20 ms before the run, in 10 ms buckets: the
	// buckets ending a window's work are the 10 from 2+10i.
	work := &WorkSeries{Origin: t0.Add(-20 * time.Millisecond), Bucket: 10 * time.Millisecond}
	for k := range 44 {
		work.Batch = append(work.Batch, int64(time.Millisecond))
		work.Interactive = append(work.Interactive, int64(k)*int64(time.Microsecond))
	}
	li := &LanesInfo{Workers: 2, Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Window: w}
	li.fill(ires, bres, work, t0)

	assert.Equal(t, int64(280), li.InteractiveDone)
	assert.Equal(t, int64(10), li.BatchDone)
	assert.Equal(t, int64(70), li.BatchOffered)
	assert.InDelta(t, 280*0.001/(0.4*2), li.InteractiveShare, 1e-9)
	assert.InDelta(t, 10*0.020/(0.4*2), li.BatchShare, 1e-9)
	require.Len(t, li.Series, 4)
	for i, lw := range li.Series {
		assert.Equal(t, time.Duration(i)*w, lw.Start)
		assert.InDelta(t, float64(ires.Series[i].Completed)*0.001/0.2, lw.Interactive, 1e-9, "window %d", i)
		assert.InDelta(t, float64(bres.Series[i].Completed)*0.020/0.2, lw.Batch, 1e-9, "window %d", i)
		assert.InDelta(t, 10*0.001/0.2, lw.TargetBatch, 1e-9, "window %d: ten buckets of 1 ms", i)
		var want float64
		for k := 2 + 10*i; k < 12+10*i; k++ {
			want += float64(k) * 1e-6
		}
		assert.InDelta(t, want/0.2, lw.TargetInteractive, 1e-9, "window %d", i)
	}
	assert.InDelta(t, 40*0.001/(0.4*2), li.TargetBatchShare, 1e-9, "the buckets before the run and after its window are left out")

	// Without the batch, or the target's log, those figures stay zero.
	li = &LanesInfo{Workers: 1, Interactive: time.Millisecond, Batch: 20 * time.Millisecond, Window: w}
	li.fill(ires, nil, nil, t0)
	assert.Zero(t, li.BatchDone)
	assert.Zero(t, li.TargetInteractiveShare)
	assert.InDelta(t, 280*0.001/0.4, li.InteractiveShare, 1e-9)
}

// On net/http, Yield does nothing: the batch handler computes its slices
// in a row and logs each, and stops when its client has left.
func TestLanesHandlerOnNetHTTP(t *testing.T) {
	cs := ChildSpec{Handler: HandlerSpec{CPU: 200 * time.Microsecond}, Lanes: &LanesChild{Batch: 2 * time.Millisecond, Slice: 500 * time.Microsecond, Span: time.Minute}}
	h, log := lanesHandler(cs)
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for _, path := range []string{LanesBatchPath, LanesInteractivePath} {
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	ws := log.series()
	sum := func(xs []int64) (n int64) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	assert.Equal(t, int64(2*time.Millisecond), sum(ws.Batch))
	assert.Equal(t, int64(200*time.Microsecond), sum(ws.Interactive))
	assert.Equal(t, 5*time.Millisecond, ws.Bucket)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, LanesBatchPath, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Empty(t, rec.Body.String(), "a request whose client left is not computed")
	assert.Equal(t, int64(2*time.Millisecond), sum(log.series().Batch))
}

// A sluice target of the live part serves the batch with its lane
// registered, and changes the lane's shares through the lane admin
// endpoint, for the run's token only.
func TestLanesTargetChangesShares(t *testing.T) {
	child := &LanesChild{
		Batch: time.Millisecond, Slice: 250 * time.Microsecond, Span: time.Minute,
		Lane:  &lanes.Spec{Name: LanesBackground, Priority: 2, Shares: 10},
		Token: "0123456789abcdef0123",
	}
	tg, ok := targetByName("sluice", serveOptions{lanes: child})
	require.True(t, ok)
	h, log := lanesHandler(ChildSpec{Handler: HandlerSpec{CPU: 100 * time.Microsecond}, Lanes: child})
	rn, err := tg.Serve(h)
	require.NoError(t, err)
	defer func() { require.NoError(t, rn.Stop()) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get(rn.URL + LanesBatchPath)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "done\n", string(body))
	var batch int64
	for _, ns := range log.series().Batch {
		batch += ns
	}
	assert.Equal(t, int64(time.Millisecond), batch, "four slices")

	// The admin endpoint has a listener of its own, outside the target's
	// admission; the target's path of the same name is its handler's.
	require.NotEmpty(t, rn.Admin)
	assert.NotContains(t, rn.Admin, strings.TrimPrefix(rn.URL, "http://"))
	resp, err = client.Get(rn.URL + LanesAdminPath)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the target's own handler, which has no such path")

	t0 := time.Now()
	bad := changeShares(context.Background(), rn.Admin, "not-the-token-of-this-run", 50, t0)
	assert.False(t, bad.OK)
	assert.Equal(t, "status 401", bad.Err)
	assert.Equal(t, 1, bad.Attempts, "a refused token is not retried")

	c := changeShares(context.Background(), rn.Admin, child.Token, 50, t0)
	assert.True(t, c.OK, "%+v", c)
	assert.Equal(t, 1, c.Attempts)
	assert.Empty(t, c.Err)
	assert.Positive(t, c.At)
	assert.Positive(t, c.Took)

	req, err := http.NewRequest(http.MethodGet, rn.Admin, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+child.Token)
	resp, err = client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		Lanes []struct {
			Name     string `json:"name"`
			Priority int32  `json:"priority"`
			Shares   uint32 `json:"shares"`
		} `json:"lanes"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.NotEmpty(t, st.Lanes)
	last := st.Lanes[len(st.Lanes)-1]
	assert.Equal(t, LanesBackground, last.Name)
	assert.Equal(t, int32(2), last.Priority)
	assert.Equal(t, uint32(50), last.Shares)
}
