package scenario

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/chaos"
	"github.com/sluice-go/sluice/bench/load"
	"github.com/sluice-go/sluice/bench/report"
)

// Defaults of Soak's zero fields.
const (
	DefaultSoakMultiple = 5
	DefaultSoakDuration = 60 * time.Second
	DefaultSoakBucket   = time.Second
	// DefaultSoakSettle is the settling time of a soak of at least 30 s;
	// a shorter one settles in its first third.
	DefaultSoakSettle = 10 * time.Second
	// DefaultPanicEvery makes 1% of the weather's requests panic.
	DefaultPanicEvery = 100
)

// DefaultChaosMix returns Soak.Chaos's default: 32 chaos clients, half of them
// slowloris (they hold a connection each and send almost nothing).
func DefaultChaosMix() chaos.Mix {
	return chaos.Mix{Slowloris: 16, NoRead: 4, Reset: 4, Garbage: 4, Flood: 4}
}

// maxSoakDuration bounds -soak-duration.
const maxSoakDuration = time.Hour

// Soak offers Multiple×C for Duration, open loop, with the chaos clients
// of Chaos alongside (on connections of their own, chaos.Run) and a
// weather handler that panics on every PanicEvery-th request, its goodput
// counted per Bucket, and the target's resident memory, goroutines and
// open descriptors read at the end of every Bucket (bench.Process.Monitor).
// Rules says what passes (EvaluateSoak). The point serves the suite's
// Shape. Zero fields take the defaults given. `sluice soak` runs it alone,
// with flags of its own.
type Soak struct {
	// Multiple is the offered load in multiples of the target's C;
	// default 5.
	Multiple float64
	// Duration is the sending window, a whole number of Buckets;
	// default 60 s.
	Duration time.Duration
	// Bucket is the interval goodput is counted in and resources read
	// at; default 1 s.
	Bucket time.Duration
	// Settle is when the target's resources should have stopped
	// growing: the flatness rules compare every reading from Settle on
	// with the highest one up to Settle. Default 10 s, or the first
	// third of a Duration under 30 s; either way rounded down to whole
	// Buckets, and at least one.
	Settle time.Duration
	// PanicEvery makes the handler panic on every PanicEvery-th request
	// to the weather service (alternately before it writes and after);
	// default 100, 1%; negative: never.
	PanicEvery int
	// Chaos is how many chaos clients of each kind run alongside the
	// load (see chaos.Run); nil means DefaultChaosMix, a zero Mix
	// none.
	Chaos *chaos.Mix
	// Rules are the pass/fail rules; zero fields take those of
	// DefaultSoakRules.
	Rules SoakRules

	duration *time.Duration // -soak-duration, set by Flags
}

// Name is "soak".
func (*Soak) Name() string { return "soak" }

// Describe says what the scenario does, for the command's help.
func (*Soak) Describe() string {
	return "a minute at 5x with misbehaving clients, checked for leaks (see sluice soak)"
}

// Flags registers -soak-duration.
func (so *Soak) Flags(fs *flag.FlagSet) {
	so.duration = new(time.Duration)
	fs.DurationVar(so.duration, "soak-duration", DefaultSoakDuration, "sending window of the soak scenario (see sluice soak)")
}

// Check reads -soak-duration, fills in the defaults of the zero fields and
// checks each. The soak starts its target and its chaos clients its own
// way, so the suite's TLS, NewConns and Clients do not apply.
func (so *Soak) Check(s *bench.SuiteConfig) error {
	if s.TLS || s.NewConns || s.Clients != 0 {
		return errors.New("bench: -tls, -newconns and -clients (SuiteConfig.TLS, NewConns, Clients) do not apply to the soak scenario, which starts its target and its chaos clients its own way")
	}
	if so.duration != nil {
		if d := *so.duration; d <= 0 || d > maxSoakDuration {
			return fmt.Errorf("-soak-duration must be in (0, 1h], got %v", d)
		}
		so.Duration = *so.duration
	}
	if so.Multiple == 0 {
		so.Multiple = DefaultSoakMultiple
	}
	if err := positiveFinite("soak", setting{"Multiple", so.Multiple}); err != nil {
		return err
	}
	if so.Duration <= 0 {
		so.Duration = DefaultSoakDuration
	}
	if so.Bucket <= 0 {
		so.Bucket = DefaultSoakBucket
	}
	if so.Duration%so.Bucket != 0 {
		return fmt.Errorf("bench: the soak scenario's Duration %v is not a whole number of %v Buckets", so.Duration, so.Bucket)
	}
	if so.Settle <= 0 {
		so.Settle = DefaultSoakSettle
		if so.Duration < 3*DefaultSoakSettle {
			so.Settle = so.Duration / 3
		}
	}
	so.Settle = max(so.Settle/so.Bucket*so.Bucket, so.Bucket)
	if so.Settle > so.Duration {
		return fmt.Errorf("bench: the soak scenario's Settle %v is past its Duration %v", so.Settle, so.Duration)
	}
	switch {
	case so.PanicEvery == 0:
		so.PanicEvery = DefaultPanicEvery
	case so.PanicEvery < 0:
		so.PanicEvery = 0
	}
	if so.Chaos == nil {
		mix := DefaultChaosMix()
		so.Chaos = &mix
	}
	for _, k := range chaos.Kinds() {
		if so.Chaos.Of(k) < 0 {
			return fmt.Errorf("bench: the soak scenario's Chaos has a negative count of %s clients", k)
		}
	}
	so.Rules = so.Rules.withDefaults()
	return nil
}

// Points is the one point: Multiple of C on the suite's Shape for
// Duration.
func (so *Soak) Points(s *bench.SuiteConfig) []bench.Point {
	return []bench.Point{{Shape: s.Shape, Spec: s.Shape.Spec, Multiple: so.Multiple, Window: so.Duration}}
}

// SoakRules are the pass/fail rules of the soak scenario (see
// EvaluateSoak).
type SoakRules struct {
	// Enforce are the targets whose checks are enforced; the checks of
	// the others are reported only. Nil means the sluice targets
	// ("sluice", "sluice-half" and their pinned forms): plain net/http
	// runs beside them to compare with, and is expected to fall short.
	Enforce []string `json:"enforce"`
	// MinGoodput is the least goodput, as a fraction of C, of every
	// bucket; default 0.7.
	MinGoodput float64 `json:"min_goodput"`
	// Growth and the slacks define "flat": every reading of goroutines,
	// descriptors and resident memory from Settle to the end is at most
	// Growth times the highest reading up to Settle (the load's first
	// buckets included) plus its slack. Defaults 1.5, 64 goroutines, 64
	// descriptors, 16 MiB. The descriptors counted are those beyond the
	// connections open at both ends (FDs - Conns): the clients decide how
	// many connections they keep open (the generator's pool grows to a
	// new high whenever a burst has more requests in flight), and a
	// server holds one descriptor for each; what it holds beyond them
	// (listeners, epoll, files, connections its client has closed) is
	// what must stay flat.
	Growth         float64 `json:"growth"`
	GoroutineSlack int     `json:"goroutine_slack"`
	FDSlack        int     `json:"fd_slack"`
	RSSSlack       int64   `json:"rss_slack"`
	// Drain is how long, once the load has ended and every client has
	// closed its connections, the target's descriptors may take to come
	// back within DrainSlack of their count before the load; defaults 5 s
	// and 4. (Goroutines are not held to it: the sluice runtime keeps
	// finished coroutines for reuse, up to 128 per worker by default;
	// the clean exit rule holds them to their count before the start.)
	Drain      time.Duration `json:"drain"`
	DrainSlack int           `json:"drain_slack"`
	// StopWithin bounds the time from the request to stop to the
	// child's exit, which must be clean (status 0); default 12 s. After
	// the stop, the child's goroutines and descriptors must be back at
	// their counts before the target started, within ExitSlack (default
	// 0: nothing may be left behind).
	StopWithin time.Duration `json:"stop_within"`
	ExitSlack  int           `json:"exit_slack"`
}

// DefaultSoakRules returns the rules of the soak scenario. A leak of one
// goroutine or descriptor per chaos connection (about a hundred a second)
// or of a kilobyte per request passes the flatness slack within seconds;
// the slack and the 1.5 factor leave room for what a healthy server
// varies by: requests in flight, the generator's pool of connections
// growing to a new high, the garbage collector's cycle. The reference is
// the highest reading up to Settle, not the one at Settle: a server whose
// answers pass the deadline sees its connections closed and reopened by
// the thousand, and its descriptors swing between a few hundred and two
// thousand from one second to the next.
func DefaultSoakRules() SoakRules {
	return SoakRules{
		Enforce:        []string{"sluice", "sluice-half", "sluice-pinned", "sluice-half-pinned", "sluice-nohold"},
		MinGoodput:     0.7,
		Growth:         1.5,
		GoroutineSlack: 64,
		FDSlack:        64,
		RSSSlack:       16 << 20,
		Drain:          5 * time.Second,
		DrainSlack:     4,
		StopWithin:     12 * time.Second,
	}
}

// withDefaults returns r with its zero fields set from DefaultSoakRules.
func (r SoakRules) withDefaults() SoakRules {
	d := DefaultSoakRules()
	if r.MinGoodput <= 0 {
		r.MinGoodput = d.MinGoodput
	}
	if r.Enforce == nil {
		r.Enforce = d.Enforce
	}
	if r.Growth <= 0 {
		r.Growth = d.Growth
	}
	if r.GoroutineSlack <= 0 {
		r.GoroutineSlack = d.GoroutineSlack
	}
	if r.FDSlack <= 0 {
		r.FDSlack = d.FDSlack
	}
	if r.RSSSlack <= 0 {
		r.RSSSlack = d.RSSSlack
	}
	if r.Drain <= 0 {
		r.Drain = d.Drain
	}
	if r.DrainSlack <= 0 {
		r.DrainSlack = d.DrainSlack
	}
	if r.StopWithin <= 0 {
		r.StopWithin = d.StopWithin
	}
	r.ExitSlack = max(r.ExitSlack, 0)
	return r
}

// SoakStop is how a soaked target's process ended.
type SoakStop struct {
	// Took is the time from the request to stop to the exit.
	Took time.Duration `json:"took"`
	// Err is bench.Process.Stop's error: empty after a clean exit
	// (status 0).
	Err string `json:"err,omitempty"`
	// Child is what the child reported after its target stopped; nil if
	// it reported nothing.
	Child *bench.ChildExit `json:"child,omitempty"`
}

// SoakDetail is what a soak sample records beyond the common figures
// (Sample.Detail); the goodput per bucket is in Sample.Series.
type SoakDetail struct {
	Duration   time.Duration `json:"duration"`
	Bucket     time.Duration `json:"bucket"`
	Settle     time.Duration `json:"settle"`
	PanicEvery int           `json:"panic_every"`
	ChaosMix   chaos.Mix     `json:"chaos_mix"`
	// Chaos is what the chaos clients did and saw, per kind.
	Chaos chaos.Stats `json:"chaos,omitempty"`
	// Resources holds the reading before the load (At 0), then one at
	// the end of every bucket.
	Resources []bench.Resources `json:"resources"`
	// Drained is the reading once the load had ended and every client
	// had closed: the first one back within Rules.DrainSlack of the
	// reading before the load, or the last one, Rules.Drain after.
	Drained bench.Resources `json:"drained"`
	Stop    SoakStop        `json:"stop"`
	Rules   SoakRules       `json:"rules"`
	Checks  []SoakCheck     `json:"checks"`
}

// SoakCheck is the outcome of one soak rule.
type SoakCheck struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Enforced is false for a check that is only reported (those of a
	// target not in SoakRules.Enforce).
	Enforced bool `json:"enforced"`
	// Detail gives the figures the outcome rests on.
	Detail string `json:"detail"`
}

// Failed reports whether the check is enforced and failed.
func (c SoakCheck) Failed() bool { return c.Enforced && !c.Pass }

// Names of the soak checks (SoakCheck.Name).
const (
	SoakGoodput    = "goodput"
	SoakUp         = "up"
	SoakGoroutines = "goroutines flat"
	SoakFDs        = "fds flat"
	SoakRSS        = "rss flat"
	SoakDrained    = "drained"
	SoakExit       = "clean exit"
)

// soakRun is a soak sample with its detail.
type soakRun = detailed[SoakDetail]

// Failures returns the enforced checks that failed in rep's soak samples,
// as "target: check: detail" lines, or an error naming a sample whose
// detail does not decode.
func (so *Soak) Failures(rep *bench.Report) ([]string, error) {
	runs, err := detailedRuns[SoakDetail](rep, so.Name())
	var out []string
	for _, r := range runs {
		for _, c := range r.detail.Checks {
			if c.Failed() {
				out = append(out, fmt.Sprintf("%s: %s: %s", r.Target, c.Name, c.Detail))
			}
		}
	}
	return out, err
}

// GoodputFractions returns the goodput of each bucket of a soak sample's
// series as a fraction of its capacity, d being its detail (nil without a
// capacity or a series).
func GoodputFractions(s *bench.Sample, d *SoakDetail) []float64 {
	if d == nil || s.Capacity <= 0 || d.Bucket <= 0 {
		return nil
	}
	out := make([]float64, len(s.Series))
	for i, b := range s.Series {
		w := min(d.Bucket, d.Duration-b.Start)
		if w <= 0 {
			w = d.Bucket
		}
		out[i] = float64(b.OK) / w.Seconds() / s.Capacity
	}
	return out
}

// ResourceAt returns the reading of a soak sample taken at at, if any.
func (d *SoakDetail) ResourceAt(at time.Duration) (bench.Resources, bool) {
	for _, r := range d.Resources {
		if r.At == at {
			return r, true
		}
	}
	return bench.Resources{}, false
}

// EvaluateSoak applies the rules of d, the detail of the soak sample s, to
// s and returns its checks, in this order:
//
//   - goodput: every bucket's goodput (2xx within the deadline, of the
//     main load, by scheduled time) is at least MinGoodput of C;
//   - up: the process was there at every reading;
//   - goroutines flat, fds flat, rss flat: every reading from Settle to
//     the end is at most Growth times the highest one up to Settle, plus
//     the slack (for the descriptors, those beyond the open connections:
//     see SoakRules.Growth);
//   - drained: once the load had ended, the descriptors came back within
//     DrainSlack of their count before the load, within Drain;
//   - clean exit: after the request to stop, the child exited with status
//     0 within StopWithin, and its goroutines and descriptors were back at
//     their counts before the target started, within ExitSlack.
//
// The checks are enforced for the targets of Rules.Enforce, reported only
// for the others.
func EvaluateSoak(s *bench.Sample, d *SoakDetail) []SoakCheck {
	if d == nil {
		return nil
	}
	r := d.Rules
	var checks []SoakCheck

	fr := GoodputFractions(s, d)
	gc := SoakCheck{Name: SoakGoodput}
	if len(fr) == 0 {
		gc.Detail = "no goodput series (or no capacity)"
	} else {
		lo, at := fr[0], 0
		for i, f := range fr {
			if f < lo {
				lo, at = f, i
			}
		}
		gc.Pass = lo >= r.MinGoodput
		gc.Detail = fmt.Sprintf("every %v at least %.2f of C (%.0f/s): min %.2f (%v-%v), median %.2f",
			d.Bucket, r.MinGoodput, s.Capacity, lo, time.Duration(at)*d.Bucket, time.Duration(at+1)*d.Bucket, report.Median(fr))
	}
	if s.Behind {
		gc.Detail += fmt.Sprintf("; the load generator fell behind its schedule (%d requests late, by up to %v)",
			s.Late, s.MaxLag.Round(time.Millisecond))
	}
	checks = append(checks, gc)

	up := SoakCheck{Name: SoakUp, Pass: len(d.Resources) > 0}
	up.Detail = fmt.Sprintf("read at all %d points", len(d.Resources))
	for _, res := range d.Resources {
		if !res.Up {
			up.Pass = false
			up.Detail = fmt.Sprintf("gone at %v", res.At)
			break
		}
	}
	if len(d.Resources) == 0 {
		up.Detail = "no reading"
	}
	checks = append(checks, up)

	beyond := func(x bench.Resources) float64 {
		if x.Conns < 0 {
			return -1
		}
		return float64(max(x.FDs-x.Conns, 0))
	}
	fc := flat(SoakFDs, "beyond the open connections, ", d, beyond, float64(r.FDSlack), "%.0f")
	fc.Detail += closeWaitAtPeak(d, beyond)
	checks = append(checks,
		flat(SoakGoroutines, "", d, func(x bench.Resources) float64 { return float64(x.Goroutines) }, float64(r.GoroutineSlack), "%.0f"),
		fc,
		flat(SoakRSS, "", d, func(x bench.Resources) float64 { return float64(x.RSS) / (1 << 20) }, float64(r.RSSSlack)/(1<<20), "%.1f MiB"),
	)

	dc := SoakCheck{Name: SoakDrained}
	base, ok := d.ResourceAt(0)
	dr := d.Drained
	switch {
	case !ok || !base.Up:
		dc.Detail = "no reading before the load"
	case !dr.Up:
		dc.Detail = "no reading after the load"
	default:
		dc.Pass = dr.FDs <= base.FDs+r.DrainSlack
		dc.Detail = fmt.Sprintf("%v after the load: fds %d (before it %d; at most +%d within %v), goroutines %d (before %d)",
			dr.At.Round(time.Millisecond), dr.FDs, base.FDs, r.DrainSlack, r.Drain, dr.Goroutines, base.Goroutines)
	}
	checks = append(checks, dc)

	ec := SoakCheck{Name: SoakExit}
	st := d.Stop
	switch {
	case st.Err != "":
		ec.Detail = st.Err
	case st.Took > r.StopWithin:
		ec.Detail = fmt.Sprintf("exited %v after the request to stop, more than %v", st.Took.Round(time.Millisecond), r.StopWithin)
	case st.Child == nil:
		ec.Detail = "the child did not report its counts after stopping"
	default:
		c := st.Child
		ec.Pass = c.GoroutinesAfter <= c.GoroutinesBefore+r.ExitSlack && c.FDsAfter <= c.FDsBefore+r.ExitSlack
		ec.Detail = fmt.Sprintf("status 0 in %v; %v after the stop began: goroutines %d (before start %d), fds %d (before %d)",
			st.Took.Round(time.Millisecond), c.After.Round(time.Millisecond), c.GoroutinesAfter, c.GoroutinesBefore, c.FDsAfter, c.FDsBefore)
		if r.ExitSlack > 0 {
			ec.Detail += fmt.Sprintf("; at most +%d", r.ExitSlack)
		}
	}
	checks = append(checks, ec)

	enforced := slices.Contains(r.Enforce, s.Target)
	for i := range checks {
		checks[i].Enforced = enforced
	}
	return checks
}

// closeWaitAtPeak says how many of the descriptors beyond the open
// connections were sockets in CLOSE_WAIT (their client gone, the server's
// close not yet done) at the reading where they were most: a busy server
// that has not yet come to its clients' hang-ups shows them there, a
// server that leaks descriptors does not.
func closeWaitAtPeak(d *SoakDetail, beyond func(bench.Resources) float64) string {
	var peak *bench.Resources
	for i := range d.Resources {
		x := &d.Resources[i]
		if x.At > 0 && (!x.Up || beyond(*x) < 0 || x.CloseWait < 0) {
			return "" // flat said why not
		}
		if x.At >= d.Settle && (peak == nil || beyond(*x) > beyond(*peak)) {
			peak = x
		}
	}
	if peak == nil {
		return ""
	}
	return fmt.Sprintf("; in CLOSE_WAIT at %v: %d", peak.At, peak.CloseWait)
}

// flat checks that value, from Settle to the end, stays at most Growth
// times its highest reading up to Settle plus slack; what, if not empty,
// starts the detail with what value is, and format prints a value.
func flat(name, what string, d *SoakDetail, value func(bench.Resources) float64, slack float64, format string) SoakCheck {
	c := SoakCheck{Name: name}
	f := func(v float64) string { return fmt.Sprintf(format, v) }
	ref, refAt, peak, peakAt, n := math.Inf(-1), time.Duration(0), math.Inf(-1), time.Duration(0), 0
	for _, r := range d.Resources {
		if r.At == 0 {
			continue // before the load
		}
		if !r.Up || value(r) < 0 {
			c.Detail = fmt.Sprintf("no reading at %v", r.At)
			return c
		}
		v := value(r)
		if r.At <= d.Settle && v > ref {
			ref, refAt = v, r.At
		}
		if r.At >= d.Settle {
			n++
			if v > peak {
				peak, peakAt = v, r.At
			}
		}
	}
	last := bench.Resources{}
	if k := len(d.Resources); k > 0 {
		last = d.Resources[k-1]
	}
	switch {
	case math.IsInf(ref, -1) || last.At < d.Settle:
		c.Detail = fmt.Sprintf("no reading up to %v", d.Settle)
		return c
	case last.At < d.Duration:
		c.Detail = fmt.Sprintf("readings stop at %v, before the end (%v)", last.At, d.Duration)
		return c
	}
	g := d.Rules.Growth
	limit := g*ref + slack
	c.Pass = peak <= limit
	cmp := "<="
	if !c.Pass {
		cmp = ">"
	}
	c.Detail = fmt.Sprintf("%smax %s (at %v) %s %s x %s (max up to %v, at %v) + %s = %s, over %d readings; at the end %s",
		what, f(peak), peakAt, cmp, strconv.FormatFloat(g, 'g', -1, 64), f(ref), d.Settle, refAt, f(slack), f(limit), n, f(value(last)))
	return c
}

// Run runs the soak on a fresh child process (one that panics every
// PanicEvery-th request and reports its goroutines): the load, the chaos
// clients and the readings together, then the drain, the stop and the
// checks. A child that fails once started (a crash, an unclean exit)
// fails checks; it is no error of the suite.
func (so *Soak) Run(ctx context.Context, t *bench.Trial) (*bench.Sample, error) {
	cs := t.Child()
	cs.TLS, cs.Probe = false, bench.SoakProbe
	if err := cs.SetHook(so.Name(), soakChild{PanicEvery: so.PanicEvery}); err != nil {
		return nil, err
	}
	proc, err := t.Start(ctx, cs)
	if err != nil {
		return nil, err
	}
	d := &SoakDetail{
		Duration: so.Duration, Bucket: so.Bucket, Settle: so.Settle,
		PanicEvery: so.PanicEvery, ChaosMix: *so.Chaos, Rules: so.Rules,
	}
	s := t.Sample()
	if err := proc.AwaitProbe(ctx, time.Time{}); err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	d.Resources = append(d.Resources, proc.ReadResources(0))

	rc, err := t.Generator(proc)
	if err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	rc.Rate, rc.Duration, rc.Bucket = t.Point.Multiple*t.Capacity, so.Duration, so.Bucket
	rc.Conns = 0 // the generator's own pool, whatever -conns says
	var (
		wg       sync.WaitGroup
		chaosErr error
		readings []bench.Resources
	)
	// The readings go on to the sending window's last bucket's end; the
	// chaos clients stop a quarter of a bucket later, so that the last
	// reading does not catch the connections they all close at once (on a
	// busy server their hang-ups wait their turn, in CLOSE_WAIT, and would
	// read as descriptors held beyond the open connections).
	chaosCtx, stopChaos := context.WithTimeout(ctx, so.Duration+so.Bucket/4)
	defer stopChaos()
	if so.Chaos.Total() > 0 {
		wg.Go(func() {
			d.Chaos, chaosErr = chaos.Run(chaosCtx, chaos.Config{
				URL: rc.URL, NoReadPath: SoakLargePath, Mix: *so.Chaos, Seed: rc.Seed,
			})
		})
	}
	m := bench.MeterCPU(proc)
	start := time.Now()
	wg.Go(func() { readings = proc.Monitor(ctx, start, so.Bucket, int(so.Duration/so.Bucket)) })
	res, runErr := load.Run(ctx, rc)
	wg.Wait()
	m.Stop(s)
	d.Resources = append(d.Resources, readings...)

	d.Drained = proc.Drain(ctx, d.Resources[0], so.Rules.DrainSlack, so.Rules.Drain)
	stopAt := time.Now()
	if err := proc.Stop(); err != nil {
		d.Stop.Err = err.Error()
	}
	d.Stop.Took = time.Since(stopAt)
	d.Stop.Child = proc.Exit
	if res == nil {
		return nil, errors.Join(runErr, chaosErr)
	}
	bench.Fill(s, res)
	s.Server = proc.Stats
	d.Checks = EvaluateSoak(s, d)
	return s, errors.Join(runErr, chaosErr, s.SetDetail(d))
}

// SoakRow sums up one soak run of one target: its goodput per bucket as a
// fraction of C, its resources at the settling time and at the end, and
// the outcome of its checks.
type SoakRow struct {
	Target   string  `json:"target"`
	Repeat   int     `json:"repeat"`
	Capacity float64 `json:"capacity"`
	Multiple float64 `json:"multiple"`
	// Behind reports that the load generator fell behind its schedule.
	Behind bool `json:"behind"`
	// MinGoodput and MedianGoodput are the least and the median goodput
	// of the buckets, as fractions of C.
	MinGoodput    float64 `json:"min_goodput_frac"`
	MedianGoodput float64 `json:"median_goodput_frac"`
	// Settle is when the flatness rules start; AtSettle and AtEnd are
	// the readings then and at the end of the sending window.
	Settle   time.Duration   `json:"settle"`
	AtSettle bench.Resources `json:"at_settle"`
	AtEnd    bench.Resources `json:"at_end"`
	// Enforced reports that the run's checks are enforced (the target
	// is in SoakRules.Enforce); otherwise they are reported only.
	Enforced bool `json:"enforced"`
	// Pass is true when every check passed; Failed names those that did
	// not.
	Pass   bool     `json:"pass"`
	Failed []string `json:"failed,omitempty"`
}

// runs returns rep's soak samples with their details, in target order
// (first appearance), then by repeat.
func (so *Soak) runs(rep *bench.Report) ([]soakRun, error) {
	runs, err := detailedRuns[SoakDetail](rep, so.Name())
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	ranks := report.TargetRanks(rep)
	slices.SortStableFunc(runs, func(a, b soakRun) int {
		if ra, rb := ranks[a.Target], ranks[b.Target]; ra != rb {
			return ra - rb
		}
		return a.Repeat - b.Repeat
	})
	return runs, nil
}

// Summarize returns one SoakRow per soak sample of rep, in target order
// (first appearance), then by repeat; nil when there is none, or an error
// naming a sample whose detail does not decode.
func (so *Soak) Summarize(rep *bench.Report) ([]SoakRow, error) {
	runs, err := so.runs(rep)
	if err != nil {
		return nil, err
	}
	var rows []SoakRow
	for _, run := range runs {
		d := &run.detail
		r := SoakRow{
			Target: run.Target, Repeat: run.Repeat, Capacity: run.Capacity, Multiple: run.Multiple,
			Behind: run.Behind, Settle: d.Settle, Pass: true,
		}
		if fr := GoodputFractions(&run.Sample, d); len(fr) > 0 {
			r.MinGoodput = slices.Min(fr)
			r.MedianGoodput = report.Median(fr)
		}
		r.AtSettle, _ = d.ResourceAt(d.Settle)
		if n := len(d.Resources); n > 0 {
			r.AtEnd = d.Resources[n-1]
		}
		r.Enforced = len(d.Checks) > 0
		for _, c := range d.Checks {
			r.Enforced = r.Enforced && c.Enforced
			if !c.Pass {
				r.Pass = false
				r.Failed = append(r.Failed, c.Name)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Rows are Summarize's, nil without soak samples or when a sample's detail
// does not decode (WriteReport says which).
func (so *Soak) Rows(rep *bench.Report) any { return rowsOf(so.Summarize(rep)) }

// WriteReport writes the soak samples of rep to w: a table with one row
// per run (goodput per bucket over C, its least and median; resident
// memory, goroutines and descriptors at the settling time and at the end;
// the result), then, per run, one line per check ("PASS" or "FAIL", with
// "(not enforced)" for a check that is only reported, and the figures)
// and one line on what the chaos clients did. It writes nothing for a
// report without soak samples.
func (so *Soak) WriteReport(w io.Writer, rep *bench.Report) error {
	runs, err := so.runs(rep)
	if err != nil {
		return err
	}
	rows, err := so.Summarize(rep)
	if err != nil || len(rows) == 0 {
		return err
	}
	var buf bytes.Buffer
	first := runs[0]
	d := first.detail
	fmt.Fprintf(&buf, "\nsoak, shape %s%s: %sx of C for %v, goodput per %v bucket; resources flat from %v\n",
		orDash(first.Shape), report.HandlerOf(rep, so.Name(), first.Shape), formatMultiple(first.Multiple),
		d.Duration, d.Bucket, d.Settle)
	fmt.Fprintf(&buf, "with %s, and %s\n\n", describeMix(d.ChaosMix), describePanics(d.PanicEvery))
	settle := "@" + strconv.FormatFloat(d.Settle.Seconds(), 'f', -1, 64) + "s"
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	reported := false
	report.Line(tw, "target", "run", "C/s", "goodput/C min", "median",
		"rss MiB "+settle, "end", "goroutines "+settle, "end", "fds "+settle, "end", "result")
	for _, r := range rows {
		target := r.Target
		if r.Behind {
			target += " *"
		}
		result := "PASS"
		if !r.Pass {
			result = "FAIL: " + strings.Join(r.Failed, ", ")
		}
		if !r.Enforced {
			result = "(" + strings.ToLower(result[:4]) + result[4:] + ")"
			reported = true
		}
		report.Line(tw, target, strconv.Itoa(r.Repeat), fmt.Sprintf("%.0f", r.Capacity),
			fmt.Sprintf("%.2f", r.MinGoodput), fmt.Sprintf("%.2f", r.MedianGoodput),
			mib(r.AtSettle), mib(r.AtEnd), goroutines(r.AtSettle), goroutines(r.AtEnd),
			fds(r.AtSettle), fds(r.AtEnd), result)
	}
	_ = tw.Flush() // into a bytes.Buffer
	for _, run := range runs {
		fmt.Fprintf(&buf, "\n%s, run %d:\n", run.Target, run.Repeat)
		for _, c := range run.detail.Checks {
			verdict := "PASS"
			if !c.Pass {
				verdict = "FAIL"
			}
			if !c.Enforced {
				verdict += " (not enforced)"
			}
			fmt.Fprintf(&buf, "  %s %s: %s\n", verdict, c.Name, c.Detail)
		}
		if desc := describeChaos(run.detail.Chaos); desc != "" {
			fmt.Fprintf(&buf, "  chaos: %s\n", desc)
		}
	}
	behind := slices.ContainsFunc(rows, func(r SoakRow) bool { return r.Behind })
	if reported || behind {
		buf.WriteString("\n")
	}
	if reported {
		buf.WriteString("A result in parentheses is reported only: the checks are enforced on the sluice targets, and\n" +
			"net/http runs beside them to compare with.\n")
	}
	if behind {
		buf.WriteString("* the load generator fell behind its schedule in this run: the target was offered less than asked.\n")
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("bench: write the soak report: %w", err)
	}
	return nil
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mib(r bench.Resources) string {
	if !r.Up {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(r.RSS)/(1<<20))
}

func goroutines(r bench.Resources) string {
	if !r.Up || r.Goroutines < 0 {
		return "-"
	}
	return strconv.Itoa(r.Goroutines)
}

func fds(r bench.Resources) string {
	if !r.Up {
		return "-"
	}
	return strconv.Itoa(r.FDs)
}

// describeMix says which chaos clients ran.
func describeMix(m chaos.Mix) string {
	if m.Total() == 0 {
		return "no chaos clients"
	}
	var parts []string
	for _, k := range chaos.Kinds() {
		if n := m.Of(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return fmt.Sprintf("%d chaos clients (%s)", m.Total(), strings.Join(parts, ", "))
}

// describePanics says how often the handler panicked.
func describePanics(every int) string {
	if every <= 0 {
		return "a handler that never panics"
	}
	return fmt.Sprintf("a handler that panics on every %d%s request (%.3g%%)", every, ordinalSuffix(every), 100/float64(every))
}

func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// describeChaos sums up what the chaos clients did, kind by kind.
func describeChaos(st chaos.Stats) string {
	var parts []string
	for _, k := range chaos.Kinds() {
		c := st[k.String()]
		if c == nil {
			continue
		}
		p := fmt.Sprintf("%s %d conns", k, c.Conns)
		if c.DialErrors > 0 {
			p += fmt.Sprintf(", %d failed dials", c.DialErrors)
		}
		if c.Requests > 0 {
			p += fmt.Sprintf(", %d requests", c.Requests)
		}
		if len(c.Status) > 0 {
			codes := slices.Sorted(func(yield func(int) bool) {
				for code := range c.Status {
					if !yield(code) {
						return
					}
				}
			})
			var sc []string
			for _, code := range codes {
				sc = append(sc, fmt.Sprintf("%d×%d", c.Status[code], code))
			}
			p += ", answers " + strings.Join(sc, " ")
		}
		if c.Stalled > 0 {
			p += fmt.Sprintf(", %d stalled the server's writes", c.Stalled)
		}
		if c.ServerClosed > 0 {
			p += fmt.Sprintf(", %d closed by the server", c.ServerClosed)
		}
		if c.CutMax > 0 {
			p += fmt.Sprintf(" (cut after %v-%v)", c.CutMin.Round(10*time.Millisecond), c.CutMax.Round(10*time.Millisecond))
		}
		if c.Resets > 0 {
			p += fmt.Sprintf(", %d reset", c.Resets)
		}
		if c.GaveUp > 0 {
			p += fmt.Sprintf(", %d given up on", c.GaveUp)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// Plots draws, for each shape of rep's soak samples, soak-<shape>.png in
// dir: the goodput per bucket as a fraction of C against time, for one
// run per target (the lowest repeat), with the least the rules allow
// marked.
func (so *Soak) Plots(dir string, rep *bench.Report) ([]string, error) {
	runs, err := so.runs(rep)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	ranks := report.TargetRanks(rep)
	return report.ShapePlots(dir, rep, so.Name(), func(shape string) (*plot.Plot, string, error) {
		return soakPlot(runs, shape, ranks)
	})
}

// soakPlot draws the goodput per bucket of the soak runs of shape, one
// per target (its lowest repeat), as fractions of C, and returns it with
// its file name, or a nil plot when there is none.
func soakPlot(runs []soakRun, shape string, ranks map[string]int) (*plot.Plot, string, error) {
	name := report.PlotFile("soak", shape)
	var picked []soakRun // one per target, in rank order
	for _, r := range runs {
		if r.Shape != shape || len(GoodputFractions(&r.Sample, &r.detail)) == 0 {
			continue
		}
		i := slices.IndexFunc(picked, func(p soakRun) bool { return p.Target == r.Target })
		switch {
		case i < 0:
			picked = append(picked, r)
		case r.Repeat < picked[i].Repeat:
			picked[i] = r
		}
	}
	if len(picked) == 0 {
		return nil, name, nil
	}
	slices.SortStableFunc(picked, func(a, b soakRun) int { return ranks[a.Target] - ranks[b.Target] })
	first := picked[0].detail
	p := report.NewPlot(fmt.Sprintf("Soak, shape %s: %sx of C with chaos clients, goodput per %v bucket",
		orDash(shape), formatMultiple(picked[0].Multiple), first.Bucket),
		"time since start of run (s)", "goodput / C")
	// The legend goes top right, above the lines: headroom is added.
	p.Legend.Left, p.Legend.XOffs = false, -report.LegendInset
	ymax := 1.0
	for _, r := range picked {
		var xys plotter.XYs
		for i, f := range GoodputFractions(&r.Sample, &r.detail) {
			xys = append(xys, plotter.XY{X: (r.Series[i].Start + r.detail.Bucket/2).Seconds(), Y: f})
			ymax = max(ymax, f)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, name, fmt.Errorf("bench: soak goodput of %s: %w", r.Target, err)
		}
		l.Color, l.Width = plotutil.Color(ranks[r.Target]), vg.Points(1.5)
		p.Add(l)
		label := r.Target
		if r.Behind {
			label += " (generator behind)"
		}
		p.Legend.Add(label, l)
	}
	end := first.Duration.Seconds()
	floor, err := plotter.NewLine(plotter.XYs{{X: 0, Y: first.Rules.MinGoodput}, {X: end, Y: first.Rules.MinGoodput}})
	if err != nil {
		return nil, name, fmt.Errorf("bench: soak floor: %w", err)
	}
	floor.Color = color.Gray{Y: 128}
	floor.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(floor)
	p.Legend.Add(fmt.Sprintf("least allowed (%.2f)", first.Rules.MinGoodput), floor)
	p.X.Min, p.X.Max = 0, end
	p.Y.Min, p.Y.Max = 0, ymax*1.35
	return p, name, nil
}
