package scenario

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/laneadmin"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/server"
)

// Paths of the lanes scenario's target (a child with the lanes hook,
// Lanes.ChildHook).
const (
	// LanesInteractivePath computes for the child's interactive work
	// (bench.ChildSpec.Handler.CPU).
	LanesInteractivePath = "/interactive"
	// LanesBatchPath computes for LanesChild.Batch, in slices of
	// LanesChild.Slice with sluice.Yield between them.
	LanesBatchPath = "/batch"
	// LanesAdminPath is the lane admin endpoint (package laneadmin) of a
	// sluice target in the live part, behind a token of the run.
	LanesAdminPath = "/admin/lanes"
)

// LanesBackground is the name of the lane the batch route goes to.
const LanesBackground = "background"

// LanesChild is the lanes hook's settings: what a target of the lanes
// scenario serves beyond its interactive work (bench.ChildSpec.Handler.CPU): the
// batch route, and on a sluice target the background lane and the lane
// admin endpoint.
type LanesChild struct {
	Batch time.Duration `json:"batch"`
	Slice time.Duration `json:"slice"`
	// Span is how long after it starts the child records its work
	// (WorkSeries).
	Span time.Duration `json:"span"`
	// Lane, when set, is registered on a sluice target's runtime, and
	// LanesBatchPath routed to it.
	Lane *lanes.Spec `json:"lane,omitempty"`
	// Token, when set, serves the lane admin endpoint at LanesAdminPath
	// of a loopback listener beside the target's (bench.Process.AdminURL),
	// behind this bearer token.
	Token string `json:"token,omitempty"`
}

// ChildHook returns the lanes scenario's part in its targets' child
// processes: the interactive and batch routes, with their work log
// (WorkSeries, in bench.Process.Report), and on a sluice target the
// background lane and the lane admin endpoint.
func (c *Lanes) ChildHook() bench.ChildHook {
	return bench.ChildHook{Name: c.Name(), Open: func(cs bench.ChildSpec, _ http.Handler) (*bench.ChildPart, error) {
		lc, err := bench.DecodeHookConfig[LanesChild](cs)
		if err != nil {
			return nil, err
		}
		h, log := lanesHandler(cs.Handler.CPU, cs.Spinner(), lc)
		return &bench.ChildPart{
			Handler:   h,
			Configure: func(cfg *sluice.Config) error { lc.configure(cfg); return nil },
			Listening: lc.listening,
			Report:    func() any { return log.series() },
		}, nil
	}}
}

// configure gives a sluice target the child's lane, when it has one: the
// lane on the runtime (cfg.Runtime.Lanes) and the batch route to it
// (cfg.Lanes).
func (lc *LanesChild) configure(cfg *sluice.Config) {
	if lc.Lane == nil {
		return
	}
	cfg.Runtime.Lanes = append(slices.Clip(cfg.Runtime.Lanes), *lc.Lane)
	cfg.Lanes = server.Lanes{Routes: map[string]string{LanesBatchPath: lc.Lane.Name}}
}

// listening, called once the sluice target listens, serves the lane admin
// endpoint over the server's lanes on a loopback listener of its own when
// the child has a lane and a Token, as docs/operations.md advises for
// admin endpoints: it stays reachable while the server refuses what it
// cannot serve in time. It returns that endpoint's URL ("" without one)
// and what stops it.
func (lc *LanesChild) listening(srv *sluice.Server) (string, func() error, error) {
	if lc.Lane == nil || lc.Token == "" {
		return "", func() error { return nil }, nil
	}
	a, err := laneadmin.New(srv.Runtime().Lanes(), laneadmin.Config{Token: lc.Token})
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(LanesAdminPath, a)
	url, stop, err := bench.ServeNetHTTP(mux)
	if err != nil {
		return "", nil, fmt.Errorf("lane admin: %w", err)
	}
	return url + LanesAdminPath, stop, nil
}

// workBuckets bounds the buckets of a child's work log, so that its line
// stays well under what the parent reads (1 MiB).
const workBuckets = 20000

// workLog records, per bucket of time since the child started, the work
// its handlers finished: batch slices and interactive requests.
type workLog struct {
	origin             time.Time
	bucket             time.Duration
	batch, interactive []atomic.Int64
}

func newWorkLog(span time.Duration) *workLog {
	b := max(5*time.Millisecond, span/workBuckets)
	n := int(span/b) + 1
	return &workLog{origin: time.Now(), bucket: b, batch: make([]atomic.Int64, n), interactive: make([]atomic.Int64, n)}
}

// add counts d of work that ended now.
func (l *workLog) add(cells []atomic.Int64, d time.Duration) {
	if i := int(time.Since(l.origin) / l.bucket); i >= 0 && i < len(cells) {
		cells[i].Add(int64(d))
	}
}

// series returns what the log holds, without its trailing empty buckets.
func (l *workLog) series() WorkSeries {
	read := func(cells []atomic.Int64) []int64 {
		out := make([]int64, len(cells))
		for i := range cells {
			out[i] = cells[i].Load()
		}
		n := len(out)
		for n > 0 && out[n-1] == 0 {
			n--
		}
		return out[:n]
	}
	return WorkSeries{Origin: l.origin, Bucket: l.bucket, Batch: read(l.batch), Interactive: read(l.interactive)}
}

// WorkSeries is the work a lanes child's handlers finished, in nanoseconds
// per Bucket from Origin: the batch's slices and the interactive requests,
// each counted in the bucket where it ended.
type WorkSeries struct {
	Origin      time.Time     `json:"origin"`
	Bucket      time.Duration `json:"bucket"`
	Batch       []int64       `json:"batch"`
	Interactive []int64       `json:"interactive"`
}

// lanesHandler is the lanes scenario's target handler, whose interactive
// requests compute for cpu with spin, and its work log.
func lanesHandler(cpu time.Duration, spin *weather.Spinner, lc *LanesChild) (http.Handler, *workLog) {
	log := newWorkLog(lc.Span)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LanesInteractivePath, func(w http.ResponseWriter, _ *http.Request) {
		spin.Spin(cpu)
		log.add(log.interactive, cpu)
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET "+LanesBatchPath, func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		for done := time.Duration(0); done < lc.Batch; {
			if ctx.Err() != nil {
				return // the client left: its work would be wasted
			}
			d := min(lc.Slice, lc.Batch-done)
			spin.Spin(d)
			log.add(log.batch, d)
			if done += d; done < lc.Batch {
				if err := sluice.Yield(ctx); err != nil {
					return
				}
			}
		}
		_, _ = io.WriteString(w, "done\n")
	})
	return mux, log
}
