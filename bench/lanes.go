package bench

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/laneadmin"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/server"
)

// Paths of the lanes scenario's target (a child with ChildSpec.Lanes).
const (
	// LanesInteractivePath computes for the child's interactive work
	// (ChildSpec.Handler.CPU).
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

// LanesChild is what a target of the lanes scenario (package
// bench/scenario) serves beyond its
// interactive work (ChildSpec.Handler.CPU): the batch route, and on a
// sluice target the background lane and the lane admin endpoint.
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
	// of a loopback listener beside the target's (Process.AdminURL),
	// behind this bearer token.
	Token string `json:"token,omitempty"`
}

// attach gives a sluice target the child's lanes: the lane on the runtime
// (cfg.Runtime.Lanes) and the batch route to it (cfg.Lanes). With a Token,
// the returned ready, called once the server listens, serves the lane
// admin endpoint over the server's lanes on a loopback listener of its
// own, as docs/operations.md advises for admin endpoints: it stays
// reachable while the server refuses what it cannot serve in time. ready
// returns that endpoint's URL ("" without a Token) and what stops it.
func (lc *LanesChild) attach(cfg *sluice.Config) (ready func(*sluice.Server) (string, func() error, error)) {
	none := func(*sluice.Server) (string, func() error, error) { return "", func() error { return nil }, nil }
	if lc.Lane == nil {
		return none
	}
	cfg.Runtime.Lanes = append(slices.Clip(cfg.Runtime.Lanes), *lc.Lane)
	cfg.Lanes = server.Lanes{Routes: map[string]string{LanesBatchPath: lc.Lane.Name}}
	if lc.Token == "" {
		return none
	}
	return func(srv *sluice.Server) (string, func() error, error) {
		a, err := laneadmin.New(srv.Runtime().Lanes(), laneadmin.Config{Token: lc.Token})
		if err != nil {
			return "", nil, err
		}
		mux := http.NewServeMux()
		mux.Handle(LanesAdminPath, a)
		url, stop, err := ServeNetHTTP(mux)
		if err != nil {
			return "", nil, fmt.Errorf("lane admin: %w", err)
		}
		return url + LanesAdminPath, stop, nil
	}
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

// lanesHandler is the lanes scenario's target handler and its work log.
func lanesHandler(cs ChildSpec) (http.Handler, *workLog) {
	lc := cs.Lanes
	log := newWorkLog(lc.Span)
	cpu := cs.Handler.CPU
	spin := weather.NewSpinner()
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
