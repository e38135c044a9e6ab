package weather

import (
	"fmt"
	"math"
	"runtime"
	"time"
)

// A Spinner computes for a given CPU time: a fixed amount of arithmetic per
// duration, measured once against the thread's CPU clock where the system
// has one (Linux, macOS, FreeBSD). So a request costs the same CPU whatever
// happens to its thread meanwhile: held off the CPU by a container's quota,
// preempted by a neighbour, it finishes later, having done all its work. A
// spin on the wall clock would finish early instead, having done less (a
// throttled request cost less than its CPU time, and a server in a quota
// served more than its capacity). It is safe for concurrent use.
type Spinner struct {
	perSecond float64 // iterations of work per second of CPU time
}

// calibrateFor is how much CPU time NewSpinner measures its loop over.
const calibrateFor = 5 * time.Millisecond

// SpinnerAt returns a Spinner that does perSecond rounds of its loop per
// second of CPU time, as another Spinner's Rate: servers compared side by
// side then do exactly the same work per request, where each one's own
// NewSpinner would measure the loop a few percent apart (the measure is
// short, and whatever interrupts it counts). It fails for a rate that is
// not positive and finite.
func SpinnerAt(perSecond float64) (*Spinner, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return nil, fmt.Errorf("weather: spinner at %v rounds a second: the rate must be positive and finite", perSecond)
	}
	return &Spinner{perSecond: perSecond}, nil
}

// SpinnerFor returns SpinnerAt(perSecond), or, for a rate it refuses (zero
// among them), NewSpinner(): a rate given when there is one, measured
// otherwise.
func SpinnerFor(perSecond float64) *Spinner {
	if s, err := SpinnerAt(perSecond); err == nil {
		return s
	}
	return NewSpinner()
}

// Rate returns the rounds of the loop s does per second of CPU time.
func (s *Spinner) Rate() float64 { return s.perSecond }

// NewSpinner measures the speed of the spinning loop on this machine, for
// about 5 ms of CPU time.
func NewSpinner() *Spinner {
	runtime.LockOSThread() // the thread's CPU clock is this goroutine's
	defer runtime.UnlockOSThread()
	const chunk = 4096
	work(chunk) // warm up
	start := cpuNow()
	var n int64
	for {
		work(chunk)
		n += chunk
		if spent := cpuNow() - start; spent >= calibrateFor {
			return &Spinner{perSecond: float64(n) / spent.Seconds()}
		}
	}
}

// Spin computes for d of CPU time; zero or less returns at once.
func (s *Spinner) Spin(d time.Duration) {
	if d > 0 {
		work(int64(d.Seconds() * s.perSecond))
	}
}

// work runs n rounds of a xorshift generator: arithmetic the compiler
// cannot drop, on nothing shared.
func work(n int64) {
	x := uint64(n) | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	if x == 0 { // never: a xorshift state that is not zero stays so
		runtime.Gosched()
	}
}
