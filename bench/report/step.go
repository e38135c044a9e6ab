package report

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/bench/load"
)

// SettleBand is how close to its level goodput must stay, as a fraction of
// the level, for the step response to count as settled.
const SettleBand = 0.10

// Step is the step response of one step sample, read from its Series.
// Rates are per second: a bucket's count divided by the bucket width.
//
// The high phase is the buckets that lie wholly within [Step.Up,
// Step.Down]. Steady is the median goodput of the high-phase buckets that
// start in its second half, HighOffered the median offered rate of all
// high-phase buckets, and Level = min(Steady, HighOffered) the goodput the
// target settles at.
//
// ReactTime is the time from Step.Up to the end of the first high-phase
// bucket whose goodput is within SettleBand (10 %) of Level or above it:
// the rise time to the level (a multiple of the bucket width when Step.Up
// falls on a bucket boundary). Some bucket always gets there: Level is at
// most the median of the second half's buckets. Stable is the share of the
// high-phase buckets after that one whose goodput stays within the band,
// above or below: how steady the level is once reached (100 ms buckets
// of Poisson arrivals are noisy by a few percent on their own). (The
// target: the level within 200 ms.)
//
// These read each request in the bucket of its scheduled time: what the
// target made of the load offered then. OutputSteady, OutputReact and
// OutputStable are the same computed on the OK answers by the bucket in
// which they ended (load.Bucket.Completed): the target's output over
// time. The two differ when a target serves the load of some moments and
// rejects that of others while its output stays level (a queue that
// builds up and is flushed). HasOutput is false for series without
// completions (older reports), and the Output fields are then zero.
//
// RecoverTime is the time from Step.Down to the end of the last bucket
// ending after Step.Down that has any rejection or failure (a bucket's end
// is capped at Step.End), or 0 when no such bucket has one. Recovered is
// false when that bucket is the last of the series: the rejections went on
// to the end of the run. (The target: no rejection later than 1 s after the
// step down.)
type Step struct {
	// Bucket is the width of the series' buckets: the smallest gap between
	// two consecutive bucket starts.
	Bucket      time.Duration `json:"bucket"`
	Steady      float64       `json:"steady"`
	HighOffered float64       `json:"high_offered"`
	Level       float64       `json:"level"`
	ReactTime   time.Duration `json:"react"`
	Stable      float64       `json:"stable"`
	RecoverTime time.Duration `json:"recover"`
	Recovered   bool          `json:"recovered"`

	HasOutput    bool          `json:"has_output"`
	OutputSteady float64       `json:"output_steady"`
	OutputReact  time.Duration `json:"output_react"`
	OutputStable float64       `json:"output_stable"`
}

// BucketWidth returns the smallest positive gap between consecutive bucket
// starts; for a single bucket, the time from its start to end (0 when
// unknown).
func BucketWidth(series []load.Bucket, end time.Duration) time.Duration {
	var w time.Duration
	for i := 1; i < len(series); i++ {
		if d := series[i].Start - series[i-1].Start; d > 0 && (w == 0 || d < w) {
			w = d
		}
	}
	if w == 0 && len(series) == 1 && end > series[0].Start {
		w = end - series[0].Start
	}
	return w
}

// perSecond turns a bucket count into a rate.
func perSecond(n int64, w time.Duration) float64 {
	return float64(n) / w.Seconds()
}

// StepMetrics computes the step response of a step sample (see Step). It
// returns false when s has no StepInfo, no usable Series (no bucket width,
// Step.Down not after Step.Up) or no bucket in the second half of the high
// phase. It does not look at s.Behind: callers leave Behind runs out.
func StepMetrics(s bench.Sample) (Step, bool) {
	info := s.Step
	if info == nil || len(s.Series) == 0 || info.Down <= info.Up {
		return Step{}, false
	}
	w := BucketWidth(s.Series, info.End)
	if w <= 0 {
		return Step{}, false
	}
	mid := info.Up + (info.Down-info.Up)/2
	var high []load.Bucket
	var offered []float64
	for _, b := range s.Series {
		if b.Start < info.Up || b.Start+w > info.Down {
			continue
		}
		high = append(high, b)
		offered = append(offered, perSecond(b.Offered, w))
	}
	st := Step{Bucket: w, HighOffered: Median(offered)}
	var ok bool
	if st.Steady, st.Level, st.ReactTime, st.Stable, ok = settle(high, mid, w, info.Up, st.HighOffered, func(b load.Bucket) int64 { return b.OK }); !ok {
		return Step{}, false
	}
	if st.HasOutput = hasCompletions(s.Series); st.HasOutput {
		st.OutputSteady, _, st.OutputReact, st.OutputStable, _ = settle(high, mid, w, info.Up, st.HighOffered, func(b load.Bucket) int64 { return b.Completed })
	}

	st.Recovered = true
	for i, b := range s.Series {
		end := b.Start + w
		if info.End > 0 && end > info.End {
			end = info.End
		}
		if end <= info.Down || b.Rejected+b.Failed == 0 {
			continue
		}
		st.RecoverTime = end - info.Down
		st.Recovered = i < len(s.Series)-1
	}
	return st, true
}

// hasCompletions reports whether a series counts its answers by end time
// (load.Bucket.Completed); series of older reports do not.
func hasCompletions(series []load.Bucket) bool {
	return slices.ContainsFunc(series, func(b load.Bucket) bool { return b.Completed > 0 })
}

// settle reads a step response from the high-phase buckets high, counting
// count of each: steady is the median rate of the buckets starting at or
// after mid, level the lower of it and offered, react the time from up to
// the end of the first bucket within SettleBand of level or above, and
// stable the share of the later buckets within the band. It returns false
// when no bucket starts at or after mid.
func settle(high []load.Bucket, mid, w, up time.Duration, offered float64, count func(load.Bucket) int64) (steady, level float64, react time.Duration, stable float64, ok bool) {
	var late []float64
	for _, b := range high {
		if b.Start >= mid {
			late = append(late, perSecond(count(b), w))
		}
	}
	if len(late) == 0 {
		return 0, 0, 0, 0, false
	}
	steady = Median(late)
	level = math.Min(steady, offered)
	reach := 0
	for perSecond(count(high[reach]), w) < (1-SettleBand)*level {
		reach++
	}
	react = high[reach].Start + w - up
	stable = 1
	if rest := high[reach+1:]; len(rest) > 0 {
		in := 0
		for _, b := range rest {
			if math.Abs(perSecond(count(b), w)-level) <= SettleBand*level {
				in++
			}
		}
		stable = float64(in) / float64(len(rest))
	}
	return steady, level, react, stable, true
}

// StepRow summarises the step samples of one target, handler shape and
// pair of multiples: medians over the kept runs (not Behind) whose
// StepMetrics could be computed.
type StepRow struct {
	Shape  string  `json:"shape"`
	Target string  `json:"target"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	// Runs is the number of kept runs, Behind the number left out; Measured
	// is the number of kept runs with step metrics.
	Runs     int `json:"runs"`
	Behind   int `json:"behind"`
	Measured int `json:"measured"`
	// Steady and HighOffered are in requests per second.
	Steady      float64       `json:"steady"`
	HighOffered float64       `json:"high_offered"`
	ReactTime   time.Duration `json:"react"`
	RecoverTime time.Duration `json:"recover"`
	// Stable is the median of the runs' Step.Stable.
	Stable float64 `json:"stable"`
	// Recovered counts the measured runs that recovered before the end of
	// the run.
	Recovered int `json:"recovered"`
	// OutputReact and OutputStable are the medians of the runs' Step
	// fields of those names, over the runs with completions
	// (OutputMeasured of them).
	OutputMeasured int           `json:"output_measured"`
	OutputReact    time.Duration `json:"output_react"`
	OutputStable   float64       `json:"output_stable"`
}

// stepKey identifies the repeats one StepRow summarises.
type stepKey struct {
	shape, target string
	low, high     float64
}

// SummarizeSteps returns one StepRow per target, shape and pair of
// multiples of the named scenario's samples whose load is a step (those
// with a bench.StepInfo), ordered by shape, low then high multiple, then
// target in the order it first appears in rep.
func SummarizeSteps(rep *bench.Report, scenario string) []StepRow {
	if rep == nil {
		return nil
	}
	keys, byKey := groupSamples(rep, func(s bench.Sample) (stepKey, bool) {
		if s.Scenario != scenario || s.Step == nil {
			return stepKey{}, false
		}
		return stepKey{shape: s.Shape, target: s.Target, low: multipleKey(s.Step.Low), high: multipleKey(s.Step.High)}, true
	})
	ranks := TargetRanks(rep)
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch {
		case a.shape != b.shape:
			return a.shape < b.shape
		case a.low != b.low:
			return a.low < b.low
		case a.high != b.high:
			return a.high < b.high
		default:
			return ranks[a.target] < ranks[b.target]
		}
	})
	rows := make([]StepRow, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, summarizeStep(k, byKey[k]))
	}
	return rows
}

// summarizeStep computes the StepRow of the samples of one key.
func summarizeStep(k stepKey, samples []bench.Sample) StepRow {
	r := StepRow{Shape: k.shape, Target: k.target, Low: k.low, High: k.high}
	var steady, offered, react, recover, stable, outReact, outStable []float64
	for _, s := range samples {
		if s.Behind {
			r.Behind++
			continue
		}
		r.Runs++
		m, ok := StepMetrics(s)
		if !ok {
			continue
		}
		r.Measured++
		steady = append(steady, m.Steady)
		offered = append(offered, m.HighOffered)
		react = append(react, float64(m.ReactTime))
		recover = append(recover, float64(m.RecoverTime))
		stable = append(stable, m.Stable)
		if m.Recovered {
			r.Recovered++
		}
		if m.HasOutput {
			r.OutputMeasured++
			outReact = append(outReact, float64(m.OutputReact))
			outStable = append(outStable, m.OutputStable)
		}
	}
	r.Steady = Median(steady)
	r.HighOffered = Median(offered)
	r.ReactTime = time.Duration(math.Round(Median(react)))
	r.RecoverTime = time.Duration(math.Round(Median(recover)))
	r.Stable = Median(stable)
	r.OutputReact = time.Duration(math.Round(Median(outReact)))
	r.OutputStable = Median(outStable)
	return r
}
