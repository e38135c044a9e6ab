package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Defaults of SoakConfig's zero fields.
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

// soakProbe is how often a soaked child reports its goroutines: often
// enough that the count read at each bucket's end is at most this old.
const soakProbe = 200 * time.Millisecond

// SoakConfig shapes the soak scenario: Multiple×C offered for Duration,
// open loop, with the chaos clients of Chaos alongside (on connections of
// their own) and a weather handler that panics on every PanicEvery-th
// request, its goodput counted per Bucket, and the target's resident
// memory, goroutines and open descriptors read at the end of every Bucket.
// Rules says what passes. Zero fields take the defaults given.
type SoakConfig struct {
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
	// load (see RunChaos); nil means DefaultChaosMix, a zero ChaosMix
	// none.
	Chaos *ChaosMix
	// Rules are the pass/fail rules; zero fields take those of
	// DefaultSoakRules.
	Rules SoakRules
}

// defaults checks c and fills in its zero fields.
func (c *SoakConfig) defaults() error {
	if c.Multiple == 0 {
		c.Multiple = DefaultSoakMultiple
	}
	if !(c.Multiple > 0) || math.IsInf(c.Multiple, 0) {
		return fmt.Errorf("bench: soak multiple %v must be positive and finite", c.Multiple)
	}
	if c.Duration <= 0 {
		c.Duration = DefaultSoakDuration
	}
	if c.Bucket <= 0 {
		c.Bucket = DefaultSoakBucket
	}
	if c.Duration%c.Bucket != 0 {
		return fmt.Errorf("bench: soak duration %v is not a whole number of %v buckets", c.Duration, c.Bucket)
	}
	if c.Settle <= 0 {
		c.Settle = DefaultSoakSettle
		if c.Duration < 3*DefaultSoakSettle {
			c.Settle = c.Duration / 3
		}
	}
	c.Settle = max(c.Settle/c.Bucket*c.Bucket, c.Bucket)
	if c.Settle > c.Duration {
		return fmt.Errorf("bench: soak settle %v is past its duration %v", c.Settle, c.Duration)
	}
	switch {
	case c.PanicEvery == 0:
		c.PanicEvery = DefaultPanicEvery
	case c.PanicEvery < 0:
		c.PanicEvery = 0
	}
	if c.Chaos == nil {
		mix := DefaultChaosMix
		c.Chaos = &mix
	}
	for _, k := range ChaosKinds {
		if c.Chaos.Of(k) < 0 {
			return fmt.Errorf("bench: soak: negative count of %s clients", k)
		}
	}
	c.Rules = c.Rules.withDefaults()
	return nil
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

// DefaultSoakRules are the rules of the soak scenario. A leak of one
// goroutine or descriptor per chaos connection (about a hundred a second)
// or of a kilobyte per request passes the flatness slack within seconds;
// the slack and the 1.5 factor leave room for what a healthy server
// varies by: requests in flight, the generator's pool of connections
// growing to a new high, the garbage collector's cycle. The reference is
// the highest reading up to Settle, not the one at Settle: a server whose
// answers pass the deadline sees its connections closed and reopened by
// the thousand, and its descriptors swing between a few hundred and two
// thousand from one second to the next.
var DefaultSoakRules = SoakRules{
	Enforce:        []string{"sluice", "sluice-half", "sluice-pinned", "sluice-half-pinned", "sluice-hold"},
	MinGoodput:     0.7,
	Growth:         1.5,
	GoroutineSlack: 64,
	FDSlack:        64,
	RSSSlack:       16 << 20,
	Drain:          5 * time.Second,
	DrainSlack:     4,
	StopWithin:     12 * time.Second,
}

// withDefaults returns r with its zero fields set from DefaultSoakRules.
func (r SoakRules) withDefaults() SoakRules {
	d := DefaultSoakRules
	if r.MinGoodput <= 0 {
		r.MinGoodput = d.MinGoodput
	}
	if r.Enforce == nil {
		r.Enforce = slices.Clone(d.Enforce)
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

// Resources are a reading of a target's process.
type Resources struct {
	// At is when the reading was taken: from the start of the load (0:
	// just before it), or, for SoakInfo.Drained, from its end.
	At time.Duration `json:"at"`
	// Up reports that the process was there to read; the other fields
	// are zero when it was not.
	Up bool `json:"up"`
	// RSS is the resident set size in bytes (VmRSS), Threads the OS
	// threads and FDs the open descriptors (/proc/PID/fd).
	RSS     int64 `json:"rss"`
	Threads int   `json:"threads"`
	FDs     int   `json:"fds"`
	// Conns counts the target's connections open at both ends
	// (ESTABLISHED in /proc/net/tcp, on its port), CloseWait those its
	// client has closed and it has not (CLOSE_WAIT); -1 when unknown.
	// Both are read just before and just after FDs: Conns is the larger
	// reading (at most FDs: connections opened after the descriptors were
	// read are not among them), CloseWait the smaller.
	Conns     int `json:"conns"`
	CloseWait int `json:"close_wait"`
	// Goroutines and HeapBytes are the child's latest report on itself
	// (runtime.NumGoroutine, the heap's live and unswept objects),
	// ProbeAge how old that report was; Goroutines is -1 without one.
	Goroutines int           `json:"goroutines"`
	HeapBytes  uint64        `json:"heap_bytes"`
	ProbeAge   time.Duration `json:"probe_age"`
}

// StopInfo is how a soaked target's process ended.
type StopInfo struct {
	// Took is the time from the request to stop to the exit.
	Took time.Duration `json:"took"`
	// Err is Process.Stop's error: empty after a clean exit (status 0).
	Err string `json:"err,omitempty"`
	// Child is what the child reported after its target stopped; nil if
	// it reported nothing.
	Child *ChildExit `json:"child,omitempty"`
}

// SoakInfo is the soak scenario's part of a Sample; the goodput per bucket
// is in Sample.Series.
type SoakInfo struct {
	Duration   time.Duration `json:"duration"`
	Bucket     time.Duration `json:"bucket"`
	Settle     time.Duration `json:"settle"`
	PanicEvery int           `json:"panic_every"`
	ChaosMix   ChaosMix      `json:"chaos_mix"`
	// Chaos is what the chaos clients did and saw, per kind.
	Chaos ChaosStats `json:"chaos,omitempty"`
	// Resources holds the reading before the load (At 0), then one at
	// the end of every bucket.
	Resources []Resources `json:"resources"`
	// Drained is the reading once the load had ended and every client
	// had closed: the first one back within Rules.DrainSlack of the
	// reading before the load, or the last one, Rules.Drain after.
	Drained Resources `json:"drained"`
	Stop    StopInfo  `json:"stop"`
	Rules   SoakRules `json:"rules"`
	Checks  []Check   `json:"checks"`
}

// Check is the outcome of one soak rule.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Enforced is false for a check that is only reported (those of a
	// target not in SoakRules.Enforce).
	Enforced bool `json:"enforced"`
	// Detail gives the figures the outcome rests on.
	Detail string `json:"detail"`
}

// Failed reports whether the check is enforced and failed.
func (c Check) Failed() bool { return c.Enforced && !c.Pass }

// Names of the soak checks.
const (
	CheckGoodput    = "goodput"
	CheckUp         = "up"
	CheckGoroutines = "goroutines flat"
	CheckFDs        = "fds flat"
	CheckRSS        = "rss flat"
	CheckDrained    = "drained"
	CheckExit       = "clean exit"
)

// SoakFailures returns the enforced checks that failed in rep's soak
// samples, as "target: check: detail" lines.
func SoakFailures(rep *Report) []string {
	var out []string
	if rep == nil {
		return nil
	}
	for _, s := range rep.Samples {
		if s.Soak == nil {
			continue
		}
		for _, c := range s.Soak.Checks {
			if c.Failed() {
				out = append(out, fmt.Sprintf("%s: %s: %s", s.Target, c.Name, c.Detail))
			}
		}
	}
	return out
}

// GoodputFractions returns the goodput of each bucket of a soak sample's
// series as a fraction of its capacity (nil without a capacity or a
// series).
func GoodputFractions(s *Sample) []float64 {
	if s.Soak == nil || s.Capacity <= 0 || s.Soak.Bucket <= 0 {
		return nil
	}
	out := make([]float64, len(s.Series))
	for i, b := range s.Series {
		w := min(s.Soak.Bucket, s.Soak.Duration-b.Start)
		if w <= 0 {
			w = s.Soak.Bucket
		}
		out[i] = float64(b.OK) / w.Seconds() / s.Capacity
	}
	return out
}

// ResourceAt returns the reading of a soak sample taken at at, if any.
func (si *SoakInfo) ResourceAt(at time.Duration) (Resources, bool) {
	for _, r := range si.Resources {
		if r.At == at {
			return r, true
		}
	}
	return Resources{}, false
}

// EvaluateSoak applies the rules of s.Soak to a soak sample and returns
// its checks, in this order:
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
func EvaluateSoak(s *Sample) []Check {
	si := s.Soak
	if si == nil {
		return nil
	}
	r := si.Rules
	var checks []Check

	fr := GoodputFractions(s)
	gc := Check{Name: CheckGoodput}
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
			si.Bucket, r.MinGoodput, s.Capacity, lo, time.Duration(at)*si.Bucket, time.Duration(at+1)*si.Bucket, median(fr))
	}
	if s.Behind {
		gc.Detail += fmt.Sprintf("; the load generator fell behind its schedule (%d requests late, by up to %v)",
			s.Late, s.MaxLag.Round(time.Millisecond))
	}
	checks = append(checks, gc)

	up := Check{Name: CheckUp, Pass: len(si.Resources) > 0}
	up.Detail = fmt.Sprintf("read at all %d points", len(si.Resources))
	for _, res := range si.Resources {
		if !res.Up {
			up.Pass = false
			up.Detail = fmt.Sprintf("gone at %v", res.At)
			break
		}
	}
	if len(si.Resources) == 0 {
		up.Detail = "no reading"
	}
	checks = append(checks, up)

	beyond := func(x Resources) float64 {
		if x.Conns < 0 {
			return -1
		}
		return float64(max(x.FDs-x.Conns, 0))
	}
	fc := flat(CheckFDs, "beyond the open connections, ", si, beyond, float64(r.FDSlack), "%.0f")
	fc.Detail += closeWaitAtPeak(si, beyond)
	checks = append(checks,
		flat(CheckGoroutines, "", si, func(x Resources) float64 { return float64(x.Goroutines) }, float64(r.GoroutineSlack), "%.0f"),
		fc,
		flat(CheckRSS, "", si, func(x Resources) float64 { return float64(x.RSS) / (1 << 20) }, float64(r.RSSSlack)/(1<<20), "%.1f MiB"),
	)

	dc := Check{Name: CheckDrained}
	base, ok := si.ResourceAt(0)
	d := si.Drained
	switch {
	case !ok || !base.Up:
		dc.Detail = "no reading before the load"
	case !d.Up:
		dc.Detail = "no reading after the load"
	default:
		dc.Pass = d.FDs <= base.FDs+r.DrainSlack
		dc.Detail = fmt.Sprintf("%v after the load: fds %d (before it %d; at most +%d within %v), goroutines %d (before %d)",
			d.At.Round(time.Millisecond), d.FDs, base.FDs, r.DrainSlack, r.Drain, d.Goroutines, base.Goroutines)
	}
	checks = append(checks, dc)

	ec := Check{Name: CheckExit}
	st := si.Stop
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

// flat checks that value, from Settle to the end, stays at most Growth
// times its highest reading up to Settle plus slack; what, if not empty,
// starts the detail with what value is, and format prints a value.
// closeWaitAtPeak says how many of the descriptors beyond the open
// connections were sockets in CLOSE_WAIT (their client gone, the server's
// close not yet done) at the reading where they were most: a busy server
// that has not yet come to its clients' hang-ups shows them there, a
// server that leaks descriptors does not.
func closeWaitAtPeak(si *SoakInfo, beyond func(Resources) float64) string {
	var peak *Resources
	for i := range si.Resources {
		x := &si.Resources[i]
		if x.At > 0 && (!x.Up || beyond(*x) < 0 || x.CloseWait < 0) {
			return "" // flat said why not
		}
		if x.At >= si.Settle && (peak == nil || beyond(*x) > beyond(*peak)) {
			peak = x
		}
	}
	if peak == nil {
		return ""
	}
	return fmt.Sprintf("; in CLOSE_WAIT at %v: %d", peak.At, peak.CloseWait)
}

func flat(name, what string, si *SoakInfo, value func(Resources) float64, slack float64, format string) Check {
	c := Check{Name: name}
	f := func(v float64) string { return fmt.Sprintf(format, v) }
	ref, refAt, peak, peakAt, n := math.Inf(-1), time.Duration(0), math.Inf(-1), time.Duration(0), 0
	for _, r := range si.Resources {
		if r.At == 0 {
			continue // before the load
		}
		if !r.Up || value(r) < 0 {
			c.Detail = fmt.Sprintf("no reading at %v", r.At)
			return c
		}
		v := value(r)
		if r.At <= si.Settle && v > ref {
			ref, refAt = v, r.At
		}
		if r.At >= si.Settle {
			n++
			if v > peak {
				peak, peakAt = v, r.At
			}
		}
	}
	last := Resources{}
	if k := len(si.Resources); k > 0 {
		last = si.Resources[k-1]
	}
	switch {
	case math.IsInf(ref, -1) || last.At < si.Settle:
		c.Detail = fmt.Sprintf("no reading up to %v", si.Settle)
		return c
	case last.At < si.Duration:
		c.Detail = fmt.Sprintf("readings stop at %v, before the end (%v)", last.At, si.Duration)
		return c
	}
	g := si.Rules.Growth
	limit := g*ref + slack
	c.Pass = peak <= limit
	cmp := "<="
	if !c.Pass {
		cmp = ">"
	}
	c.Detail = fmt.Sprintf("%smax %s (at %v) %s %s x %s (max up to %v, at %v) + %s = %s, over %d readings; at the end %s",
		what, f(peak), peakAt, cmp, strconv.FormatFloat(g, 'g', -1, 64), f(ref), si.Settle, refAt, f(slack), f(limit), n, f(value(last)))
	return c
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// soak runs the soak scenario on a fresh child process: the load, the
// chaos clients and the readings together, then the drain, the stop and
// the checks. A child that fails once started (a crash, an unclean exit)
// fails checks; it is no error of the suite.
func (cfg *SuiteConfig) soak(ctx context.Context, target string, p Point, capacity float64, repeat, run int) (*Sample, error) {
	sc := cfg.Soak
	proc, err := startChild(ctx, cfg.Launch, ChildSpec{
		Target: target, Handler: p.Spec, Nice: TargetNice, Soak: true, PanicEvery: sc.PanicEvery, Probe: soakProbe,
	}, cfg.TargetCPUs)
	if err != nil {
		return nil, err
	}
	info := &SoakInfo{
		Duration: sc.Duration, Bucket: sc.Bucket, Settle: sc.Settle,
		PanicEvery: sc.PanicEvery, ChaosMix: *sc.Chaos, Rules: sc.Rules,
	}
	s := &Sample{
		Scenario: ScenarioSoak, Shape: p.Shape.Name, Handler: p.Spec, Target: target,
		Repeat: repeat, Capacity: capacity, Multiple: p.Multiple, Soak: info,
	}
	if err := proc.awaitProbe(ctx, time.Time{}, processStartTimeout); err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	info.Resources = append(info.Resources, proc.resources(0))

	rc := Config{
		URL:      proc.URL + WeatherPath,
		Rate:     p.Multiple * capacity,
		Duration: sc.Duration,
		Bucket:   sc.Bucket,
		Deadline: cfg.Deadline,
		Seed:     cfg.Seed + uint64(run),
	}
	if !cfg.Constant {
		rc.Arrival = Poisson
	}
	var (
		wg       sync.WaitGroup
		chaosErr error
		readings []Resources
	)
	// The readings go on to the sending window's last bucket's end; the
	// chaos clients stop a quarter of a bucket later, so that the last
	// reading does not catch the connections they all close at once (on a
	// busy server their hang-ups wait their turn, in CLOSE_WAIT, and would
	// read as descriptors held beyond the open connections).
	chaosCtx, stopChaos := context.WithTimeout(ctx, sc.Duration+sc.Bucket/4)
	defer stopChaos()
	if sc.Chaos.Total() > 0 {
		wg.Go(func() {
			info.Chaos, chaosErr = RunChaos(chaosCtx, ChaosConfig{
				URL: rc.URL, NoReadPath: LargePath, Mix: *sc.Chaos, Seed: rc.Seed,
			})
		})
	}
	start := time.Now()
	wg.Go(func() { readings = proc.monitor(ctx, start, sc.Bucket, int(sc.Duration/sc.Bucket)) })
	cpu0, tcpu0 := selfCPU(), proc.cpu()
	res, runErr := Run(ctx, rc)
	wg.Wait()
	gen, tcpu, elapsed := selfCPU()-cpu0, proc.cpu()-tcpu0, time.Since(start)
	info.Resources = append(info.Resources, readings...)

	info.Drained = proc.drain(ctx, info.Resources[0], sc.Rules)
	stopAt := time.Now()
	if err := proc.Stop(); err != nil {
		info.Stop.Err = err.Error()
	}
	info.Stop.Took = time.Since(stopAt)
	info.Stop.Child = proc.Exit
	if res == nil {
		return nil, errors.Join(runErr, chaosErr)
	}
	Fill(s, res)
	s.Server = proc.Stats
	if sec := elapsed.Seconds(); sec > 0 {
		s.TargetCPU = tcpu.Seconds() / sec
		s.GeneratorCPU = gen.Seconds() / sec
	}
	info.Checks = EvaluateSoak(s)
	return s, errors.Join(runErr, chaosErr)
}

// awaitProbe waits up to limit for a probe line read after since.
func (p *Process) awaitProbe(ctx context.Context, since time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if r := p.probe.Load(); r != nil && r.at.After(since) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the target's child did not report its goroutines within %v", limit)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resources reads the child's process now, as of at.
func (p *Process) resources(at time.Duration) Resources {
	r := Resources{At: at, Goroutines: -1, Conns: -1, CloseWait: -1}
	rss, threads, err := procStatus(p.pid())
	if err != nil {
		return r
	}
	// The connections are read on both sides of the descriptors, and the
	// larger count kept: when the clients close many at once (the load's
	// end), the server closes their descriptors between the two readings,
	// and connections read after the descriptors would leave those read
	// as held beyond the connections.
	est1, cw1, err1 := tcpConns(p.addr())
	fds := countFDs(strconv.Itoa(p.pid()))
	if fds < 0 {
		return r
	}
	r.Up, r.RSS, r.Threads, r.FDs = true, rss, threads, fds
	if est2, cw2, err2 := tcpConns(p.addr()); err1 == nil && err2 == nil {
		r.Conns, r.CloseWait = min(max(est1, est2), fds), min(cw1, cw2)
	}
	if pr := p.probe.Load(); pr != nil {
		r.Goroutines, r.HeapBytes, r.ProbeAge = pr.Goroutines, pr.HeapBytes, time.Since(pr.at)
	}
	return r
}

// addr returns the address of the child's URL (the zero AddrPort if it has
// no IP address and port).
func (p *Process) addr() netip.AddrPort {
	u, err := url.Parse(p.URL)
	if err != nil {
		return netip.AddrPort{}
	}
	a, _ := netip.ParseAddrPort(u.Host)
	return a
}

// monitor reads the child's process at start + k*bucket for k = 1..n and
// returns the readings, fewer if ctx ends first.
func (p *Process) monitor(ctx context.Context, start time.Time, bucket time.Duration, n int) []Resources {
	out := make([]Resources, 0, n)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for k := 1; k <= n; k++ {
		at := time.Duration(k) * bucket
		if d := time.Until(start.Add(at)); d > 0 {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return out
			case <-t.C:
			}
		}
		out = append(out, p.resources(at))
	}
	return out
}

// drain reads the child's process every 100 ms, up to rules.Drain, until
// its descriptors are back within rules.DrainSlack of base, and returns the
// last reading (with the goroutines the child reported after the drain
// began, when it has).
func (p *Process) drain(ctx context.Context, base Resources, rules SoakRules) Resources {
	start := time.Now()
	for {
		r := p.resources(time.Since(start))
		fresh := false
		if pr := p.probe.Load(); pr != nil {
			fresh = pr.at.After(start)
		}
		back := fresh && r.FDs <= base.FDs+rules.DrainSlack
		if back || !r.Up || r.At >= rules.Drain || ctx.Err() != nil {
			return r
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}
