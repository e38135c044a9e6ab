package admit

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logObserver logs what it is told.
type logObserver struct{ log *events }

func (o logObserver) Started(a *Attempt, wait time.Duration) {
	o.log.add("started %s %v", a.Path, wait)
}

func (o logObserver) Ended(a *Attempt, out Outcome) {
	o.log.add("ended %s %d %v", a.Path, out.Status, out.Latency)
}

func (o logObserver) Rejected(a *Attempt, reason string, status int) {
	o.log.add("rejected %s %s %d", a.Path, reason, status)
}

func (o logObserver) Canceled(a *Attempt) { o.log.add("canceled %s", a.Path) }

// An observer hears of each start with the wait before it (from the
// decision, or from the queue), each end with the pipeline's latency, each
// rejection with its reason and status, and each cancellation; after its
// removal, nothing.
func TestObserverHearsStartsEndsAndRejections(t *testing.T) {
	var log events
	gate := newSwitch("g", true, &log)
	clk := newClock(ms)
	p := newPipeline(t, Config{Gates: []Policy{gate}, Queue: &QueueConfig{}}, Host{Clock: clk.now})
	var heard events
	remove := p.Observe(logObserver{&heard})

	first := newReq("/1")
	require.Equal(t, Admitted, p.Decide(&first.Ticket))
	gate.open.Store(false)
	second := newReq("/2")
	require.Equal(t, Queued, p.Decide(&second.Ticket))
	clk.add(3 * ms)
	gate.open.Store(true)
	p.Done(&first.Ticket, Outcome{Status: 204})
	require.Equal(t, "start", second.got())
	clk.add(2 * ms)
	p.Done(&second.Ticket, Outcome{Status: 500})

	gate.open.Store(false)
	third := newReq("/3")
	require.Equal(t, Queued, p.Decide(&third.Ticket))
	require.True(t, p.Withdraw(&third.Ticket))
	assert.Equal(t, []string{
		"started /1 0s",
		"ended /1 204 3ms",
		"started /2 3ms",
		"ended /2 500 2ms",
		"canceled /3",
	}, heard.take())

	remove()
	remove()
	gate.open.Store(true)
	fourth := newReq("/4")
	require.Equal(t, Admitted, p.Decide(&fourth.Ticket))
	p.Done(&fourth.Ticket, Outcome{Status: 200})
	assert.Empty(t, heard.take())
}

// The wait of a request whose arrival the adapter read (Ticket.Stamp)
// counts from that arrival, its time in the socket buffers included; a
// policy's refusal is reported with the policy's status.
func TestObserverWaitCountsFromTheArrival(t *testing.T) {
	var log events
	quota := newSwitch("quota", false, &log)
	quota.refusal = &Refusal{Reason: "rate-limit", Status: 429}
	p := newPipeline(t, Config{Policies: []Policy{quota}}, Host{})
	var got []time.Duration
	var rejections []string
	p.Observe(&funcObserver{
		started:  func(w time.Duration) { got = append(got, w) },
		rejected: func(reason string, status int) { rejections = append(rejections, fmt.Sprint(reason, status)) },
	})
	r := newReq("/a")
	r.Stamp = time.Now().Add(-20 * time.Millisecond).UnixNano()
	require.Equal(t, Rejected, p.Decide(&r.Ticket))
	assert.Equal(t, []string{"rate-limit429"}, rejections)
	quota.open.Store(true)
	r = newReq("/b")
	r.Stamp = time.Now().Add(-20 * time.Millisecond).UnixNano()
	require.Equal(t, Admitted, p.Decide(&r.Ticket))
	require.Len(t, got, 1)
	assert.GreaterOrEqual(t, got[0], 20*time.Millisecond)
	assert.Less(t, got[0], DefaultMaxAge)
}

// funcObserver calls its functions, when set.
type funcObserver struct {
	started  func(time.Duration)
	ended    func(Outcome)
	rejected func(string, int)
}

func (o *funcObserver) Started(_ *Attempt, w time.Duration) {
	if o.started != nil {
		o.started(w)
	}
}

func (o *funcObserver) Ended(_ *Attempt, out Outcome) {
	if o.ended != nil {
		o.ended(out)
	}
}

func (o *funcObserver) Rejected(_ *Attempt, reason string, status int) {
	if o.rejected != nil {
		o.rejected(reason, status)
	}
}

func (o *funcObserver) Canceled(*Attempt) {}

// Observing costs no allocation per request.
func TestObserverAllocatesNothing(t *testing.T) {
	p := newPipeline(t, Config{}, Host{})
	var n int
	p.Observe(&funcObserver{ended: func(Outcome) { n++ }})
	var tk Ticket
	tk.Method, tk.Path = "GET", "/"
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		tk.Stamp = time.Now().UnixNano()
		if p.Decide(&tk) == Admitted {
			p.Done(&tk, Outcome{Status: 200})
		}
	}))
	assert.Positive(t, n)
}

// BenchmarkObserved is BenchmarkDecideDone's "age" case with none, one
// and two observers that do nothing: the cost of the hook itself.
func BenchmarkObserved(b *testing.B) {
	for _, n := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("observers=%d", n), func(b *testing.B) {
			p, err := New(Config{}, Host{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			for range n {
				p.Observe(&funcObserver{})
			}
			var t Ticket
			t.Method, t.Path = "GET", "/"
			stamp := time.Now().UnixNano()
			b.ReportAllocs()
			for b.Loop() {
				t.Stamp = stamp
				if p.Decide(&t) == Admitted {
					p.Done(&t, Outcome{Status: 200})
				}
			}
		})
	}
}
