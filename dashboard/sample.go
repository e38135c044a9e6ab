package dashboard

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/obs"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/tenant"
)

// Sample is what the page plots for one interval: rates over the interval
// since the previous sample, and levels at its end. Durations are in
// milliseconds, rates per second, fractions in [0, 1].
type Sample struct {
	// Seq numbers the samples, from 1.
	Seq uint64 `json:"seq"`
	// Time is when it was taken, in Unix milliseconds; Seconds is the
	// interval it covers.
	Time    int64   `json:"t"`
	Seconds float64 `json:"dt"`

	// Workers is the executor's worker count; Busy the workers busy at
	// the end of the interval, BusyMean the mean busy over it.
	Workers  int     `json:"workers"`
	Busy     int     `json:"busy"`
	BusyMean float64 `json:"busy_mean"`

	// Admitted, Rejected and Queued are requests per second: started,
	// refused unstarted, and made to wait in the queue. RejectedBy splits
	// Rejected by reason.
	Admitted   float64            `json:"admitted"`
	Rejected   float64            `json:"rejected"`
	Queued     float64            `json:"queued"`
	RejectedBy map[string]float64 `json:"rejected_by,omitempty"`
	// InFlight, QueueLen and Conns are levels: requests running, requests
	// waiting in the queue, open connections (-1 when unknown).
	InFlight int64 `json:"in_flight"`
	QueueLen int   `json:"queue_len"`
	Conns    int   `json:"conns"`

	// Wait is the wait before the start of the requests started in the
	// interval (from their arrival), Latency the run time of those that
	// ended in it: percentiles in milliseconds.
	Wait    Percentiles `json:"wait"`
	Latency Percentiles `json:"latency"`

	// MaxAge is the age limit in force, in milliseconds (0: none);
	// Standing says whether the standing line's target is what sets it.
	MaxAge   float64 `json:"max_age"`
	Standing bool    `json:"standing"`
	// Closed is the fraction of the interval the gates were closed.
	Closed float64 `json:"closed"`

	// Lanes are the executor's lanes over the interval.
	Lanes []LaneSample `json:"lanes,omitempty"`
}

// Percentiles are the 50th, 90th and 99th percentiles, in milliseconds,
// of N observations.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	N   uint64  `json:"n"`
}

// LaneSample is one lane over an interval.
type LaneSample struct {
	Name string `json:"name"`
	// Tasks is tasks run per second; Busy the worker time they ran, in
	// workers (1: one worker's whole interval); Wait the mean wait of a
	// task in the lane's run queue, in milliseconds; Queued the tasks
	// waiting at the end.
	Tasks  float64 `json:"tasks"`
	Busy   float64 `json:"busy"`
	Wait   float64 `json:"wait"`
	Queued int64   `json:"queued"`
}

// TenantRow is one tenant's figures over the last tenant window.
type TenantRow struct {
	Tenant string `json:"tenant"`
	// Requests is its requests per second; Share its fraction of all the
	// requests, AdmittedShare of the admitted ones, BlameShare of the
	// blame (the time the gates were closed, charged to the requests
	// running).
	Requests      float64 `json:"requests"`
	Share         float64 `json:"share"`
	AdmittedShare float64 `json:"admitted_share"`
	BlameShare    float64 `json:"blame_share"`
	// Drop is the fraction the drop table gives it; Dropped the fraction
	// of its requests dropped. On a server with no gates, or with the
	// timed queue, Dropped is the smaller: the tracker lets a quarter more
	// of a dropped tenant's requests through, and the server refuses their
	// excess by age (package tenant, Enforcement).
	Drop    float64 `json:"drop"`
	Dropped float64 `json:"dropped"`
}

// reading is every counter the dashboard reads, at one time.
type reading struct {
	at      time.Time
	stats   admit.Stats
	rec     obs.Snapshot
	snap    *sched.Snapshot // nil without an executor
	conns   int
	tenants map[string]tenant.Usage // nil without a tracker
}

// delta makes the sample of the interval from prev to cur.
func delta(prev, cur *reading, seq uint64) Sample {
	dt := cur.at.Sub(prev.at).Seconds()
	if dt <= 0 {
		dt = 1e-9
	}
	rate := func(a, b int64) float64 { return float64(max(b-a, 0)) / dt }
	st, ps := cur.stats, prev.stats
	s := Sample{
		Seq: seq, Time: cur.at.UnixMilli(), Seconds: dt,
		Admitted: rate(ps.Admitted, st.Admitted),
		Rejected: rate(ps.Rejected, st.Rejected),
		Queued:   rate(ps.Queued, st.Queued),
		InFlight: st.InFlight,
		QueueLen: st.Queue.Len,
		Conns:    cur.conns,
		Wait:     percentiles(cur.rec.Wait.Sub(prev.rec.Wait)),
		Latency:  percentiles(cur.rec.Latency.Sub(prev.rec.Latency)),
		MaxAge:   ms(st.MaxAge),
		Standing: st.Standing,
		Closed:   min(max((st.GatesClosed-ps.GatesClosed).Seconds()/dt, 0), 1),
	}
	for why, n := range st.RejectedBy {
		if r := rate(ps.RejectedBy[why], n); r > 0 {
			if s.RejectedBy == nil {
				s.RejectedBy = map[string]float64{}
			}
			s.RejectedBy[why] = r
		}
	}
	if cur.snap != nil && prev.snap != nil {
		s.Workers = len(cur.snap.Workers)
		s.Busy = cur.snap.Busy
		var busy int64
		for i, w := range cur.snap.Workers {
			if i < len(prev.snap.Workers) {
				busy += max(w.BusyNs-prev.snap.Workers[i].BusyNs, 0)
			}
		}
		s.BusyMean = float64(busy) / 1e9 / dt
		for i, l := range cur.snap.Lanes {
			ls := LaneSample{Name: l.Name, Queued: l.Queued}
			if i < len(prev.snap.Lanes) {
				p := prev.snap.Lanes[i]
				ls.Tasks = rate(p.Run, l.Run)
				ls.Busy = float64(max(l.RanNs-p.RanNs, 0)) / 1e9 / dt
				if n := l.Run - p.Run; n > 0 {
					ls.Wait = float64(max(l.WaitedNs-p.WaitedNs, 0)) / 1e6 / float64(n)
				}
			}
			s.Lanes = append(s.Lanes, ls)
		}
	}
	return s
}

func percentiles(c obs.Counts) Percentiles {
	return Percentiles{P50: ms(c.Quantile(0.5)), P90: ms(c.Quantile(0.9)), P99: ms(c.Quantile(0.99)), N: c.Count}
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// tenantRows makes the tenant table from two readings of the tracker's
// totals, and its drop table.
func tenantRows(prev, cur map[string]tenant.Usage, seconds float64, drops map[string]float64) []TenantRow {
	if seconds <= 0 {
		seconds = 1e-9
	}
	var all, admitted int64
	var blame time.Duration
	diff := map[string]tenant.Usage{}
	for name, u := range cur {
		p := prev[name]
		d := tenant.Usage{
			Requests: max(u.Requests-p.Requests, 0),
			Admitted: max(u.Admitted-p.Admitted, 0),
			Dropped:  max(u.Dropped-p.Dropped, 0),
			Blame:    max(u.Blame-p.Blame, 0),
		}
		diff[name] = d
		all += d.Requests
		admitted += d.Admitted
		blame += d.Blame
	}
	frac := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	names := slices.Sorted(maps.Keys(diff))
	for name := range drops {
		if _, ok := diff[name]; !ok {
			names = append(names, name)
		}
	}
	rows := make([]TenantRow, 0, len(names))
	for _, name := range names {
		d := diff[name]
		rows = append(rows, TenantRow{
			Tenant:        name,
			Requests:      float64(d.Requests) / seconds,
			Share:         frac(float64(d.Requests), float64(all)),
			AdmittedShare: frac(float64(d.Admitted), float64(admitted)),
			BlameShare:    frac(float64(d.Blame), float64(blame)),
			Drop:          drops[name],
			Dropped:       frac(float64(d.Dropped), float64(d.Requests)),
		})
	}
	slices.SortFunc(rows, func(a, b TenantRow) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(b.Drop, a.Drop), strings.Compare(a.Tenant, b.Tenant))
	})
	return rows
}
