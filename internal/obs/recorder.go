package obs

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/admit"
)

// NumClasses is the number of status classes a Recorder counts answers
// in: index status/100 for 1xx to 5xx, 0 for anything else (no status
// written).
const NumClasses = 6

// ClassName returns the name of class i: "1xx" to "5xx", or "other".
func ClassName(i int) string {
	if i >= 1 && i < NumClasses {
		return string(rune('0'+i)) + "xx"
	}
	return "other"
}

// Recorder is an admit.Observer that counts what it is told: the wait of
// each request before its start, the run time of each admitted request,
// every answer by status class (rejections included), and rejections by
// reason and status. It allocates nothing per request once each
// rejection's reason and status have been seen. The zero value is ready.
type Recorder struct {
	// Wait is the time from each admitted request's arrival to its start;
	// Latency the time from its start to its end.
	Wait, Latency Hist

	classes [NumClasses]atomic.Uint64
	errors  atomic.Uint64

	mu       sync.Mutex                                   // adds to rejected
	rejected atomic.Pointer[map[Rejection]*atomic.Uint64] // copy on write
}

// Rejection names a kind of rejection: its reason and status.
type Rejection struct {
	Reason string
	Status int
}

// Started records a request's wait.
func (r *Recorder) Started(_ *admit.Attempt, wait time.Duration) { r.Wait.Observe(wait) }

// Ended records a request's run time and its status class.
func (r *Recorder) Ended(_ *admit.Attempt, o admit.Outcome) {
	r.Latency.Observe(o.Latency)
	r.classes[class(o.Status)].Add(1)
	if o.Err != nil {
		r.errors.Add(1)
	}
}

// Canceled implements admit.Observer: a request whose client went away has
// no answer that reached anyone, and counts in no class (the pipeline
// counts it: admit.Stats.Canceled).
func (r *Recorder) Canceled(*admit.Attempt) {}

// Rejected counts a rejection by reason and status, and its status class.
func (r *Recorder) Rejected(_ *admit.Attempt, reason string, status int) {
	r.classes[class(status)].Add(1)
	k := Rejection{Reason: reason, Status: status}
	if m := r.rejected.Load(); m != nil {
		if n := (*m)[k]; n != nil {
			n.Add(1)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var next map[Rejection]*atomic.Uint64
	if m := r.rejected.Load(); m != nil {
		if n := (*m)[k]; n != nil { // added meanwhile
			n.Add(1)
			return
		}
		next = maps.Clone(*m)
	} else {
		next = map[Rejection]*atomic.Uint64{}
	}
	n := new(atomic.Uint64)
	n.Add(1)
	next[k] = n
	r.rejected.Store(&next)
}

// class returns the status class of status (see ClassName).
func class(status int) int {
	if c := status / 100; status > 0 && c >= 1 && c < NumClasses {
		return c
	}
	return 0
}

// Snapshot is a Recorder's counts at one time.
type Snapshot struct {
	Wait, Latency Counts
	// Classes counts answers by status class (see ClassName).
	Classes [NumClasses]uint64
	// Errors counts admitted requests whose handler failed (admit.Outcome.Err).
	Errors uint64
	// Rejected counts rejections by reason and status, sorted.
	Rejected []RejectionCount
}

// RejectionCount is how many rejections of one kind there were.
type RejectionCount struct {
	Rejection
	N uint64
}

// Snapshot returns the counts so far.
func (r *Recorder) Snapshot() Snapshot {
	s := Snapshot{Wait: r.Wait.Counts(), Latency: r.Latency.Counts(), Errors: r.errors.Load()}
	for i := range r.classes {
		s.Classes[i] = r.classes[i].Load()
	}
	if m := r.rejected.Load(); m != nil {
		for k, n := range *m {
			s.Rejected = append(s.Rejected, RejectionCount{Rejection: k, N: n.Load()})
		}
	}
	slices.SortFunc(s.Rejected, func(a, b RejectionCount) int {
		return cmp.Or(strings.Compare(a.Reason, b.Reason), cmp.Compare(a.Status, b.Status))
	})
	return s
}
