package admit

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimeoutFormat(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		text string
	}{
		{0, "0n"},
		{-time.Second, "0n"},
		{250 * time.Millisecond, "250000u"},
		{99_999_999, "99999999n"},
		{time.Second, "1000000u"},
		{2 * time.Minute, "120000m"},
		{30 * time.Hour, "108000S"},
	} {
		assert.Equal(t, c.text, FormatTimeout(c.d), "%v", c.d)
		got, ok := ParseTimeout(c.text)
		require.True(t, ok, c.text)
		assert.Equal(t, max(c.d, 0), got, c.text)
	}
	for text, want := range map[string]time.Duration{"250m": 250 * time.Millisecond, "1S": time.Second, "3M": 3 * time.Minute, "2H": 2 * time.Hour, "7u": 7 * time.Microsecond} {
		got, ok := ParseTimeout(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, got, text)
	}
	for _, bad := range []string{"", "m", "10", "10x", "-1m", "123456789m", "1.5S", " 1S"} {
		_, ok := ParseTimeout(bad)
		assert.False(t, ok, "%q", bad)
	}
}

func timed(path, left string) *req {
	r := newReq(path)
	r.Header = http.Header{TimeoutHeader: {left}}
	return r
}

// A request whose caller's time has run out, or is under MinLeft, is
// rejected unstarted with the reason "deadline" and no Retry-After; one
// with time left, or without the field, is admitted, and its ticket's
// Deadline says when the time runs out.
func TestDeadlineRejectsRequestsOutOfTime(t *testing.T) {
	gate := newSwitch("g", true, &events{})
	clk := newClock(ms)
	p := newPipeline(t, Config{Gates: []Policy{gate}, Deadline: DeadlineConfig{MinLeft: 5 * time.Millisecond}}, Host{Clock: clk.now})

	out := timed("/out", "0m")
	require.Equal(t, Rejected, p.Decide(&out.Ticket))
	a, _ := out.Answer()
	assert.Equal(t, "deadline", a.Reason)
	assert.Equal(t, int64(-1), a.RetryAfter, "no time left to retry in")
	assert.Equal(t, http.StatusServiceUnavailable, a.Status)

	short := timed("/short", "4m")
	assert.Equal(t, Rejected, p.Decide(&short.Ticket), "under MinLeft")

	ok := timed("/ok", "200m")
	before := time.Now()
	require.Equal(t, Admitted, p.Decide(&ok.Ticket))
	dl, has := ok.Deadline()
	require.True(t, has)
	assert.WithinDuration(t, before.Add(200*time.Millisecond), dl, 20*time.Millisecond)
	p.Done(&ok.Ticket, Outcome{Status: 200})

	none := newReq("/none")
	require.Equal(t, Admitted, p.Decide(&none.Ticket))
	_, has = none.Deadline()
	assert.False(t, has)
	p.Done(&none.Ticket, Outcome{Status: 200})

	bad := timed("/bad", "soon")
	require.Equal(t, Admitted, p.Decide(&bad.Ticket), "a field that does not parse is ignored")
	p.Done(&bad.Ticket, Outcome{Status: 200})
	assert.Equal(t, map[string]int64{"deadline": 2}, p.Stats().RejectedBy)
}

// The time left counts from the request's arrival: a request stamped 30 ms
// ago with 20 ms left has none.
func TestDeadlineCountsFromArrival(t *testing.T) {
	gate := newSwitch("g", true, &events{})
	clk := newClock(100 * ms)
	p := newPipeline(t, Config{Gates: []Policy{gate}}, Host{Clock: clk.now})
	r := timed("/x", "20m")
	r.Stamp = time.Now().UnixNano() - 30*ms
	require.Equal(t, Rejected, p.Decide(&r.Ticket))
	a, _ := r.Answer()
	assert.Equal(t, "deadline", a.Reason)
}

// A request waits in the queue no longer than its time left: with 30 ms
// left and a 100 ms queue, its deadline there is 30 ms away; one without
// the field keeps the queue's 100 ms.
func TestDeadlineBoundsTheQueueWait(t *testing.T) {
	gate := newSwitch("g", false, &events{})
	clk := newClock(100 * ms)
	p := newPipeline(t, Config{Gates: []Policy{gate}, Queue: &QueueConfig{}, MaxAge: 100 * time.Millisecond, Target: -1},
		Host{Clock: clk.now})
	long := newReq("/long")
	require.Equal(t, Queued, p.Decide(&long.Ticket))
	short := timed("/short", "30m")
	require.Equal(t, Queued, p.Decide(&short.Ticket))
	next, ok := p.Queue().Expire()
	require.True(t, ok)
	assert.Equal(t, 130*ms, next, "the short request's deadline comes first")
	clk.add(30 * ms)
	p.expire()
	assert.Equal(t, "reject queue-timeout", short.got())
	assert.Empty(t, long.got(), "the other still waits")
	next, ok = p.Queue().Expire()
	require.True(t, ok)
	assert.Equal(t, 200*ms, next)
}

func TestDeadlineIgnore(t *testing.T) {
	gate := newSwitch("g", true, &events{})
	p := newPipeline(t, Config{Gates: []Policy{gate}, Deadline: DeadlineConfig{Ignore: true}}, Host{Clock: newClock(ms).now})
	r := timed("/x", "0n")
	require.Equal(t, Admitted, p.Decide(&r.Ticket))
	p.Done(&r.Ticket, Outcome{Status: 200})
}

func TestLoad(t *testing.T) {
	gate := newSwitch("g", true, &events{})
	p := newPipeline(t, Config{Gates: []Policy{gate}}, Host{Clock: newClock(ms).now, Shards: 2})
	r := newReq("/x")
	r.Shard = 1
	require.Equal(t, Admitted, p.Decide(&r.Ticket))
	n, q := p.Load()
	assert.Equal(t, 1, n)
	assert.Equal(t, 0, q)
	assert.Equal(t, "0.50", FormatLoad(n, q, 2))
	p.Done(&r.Ticket, Outcome{Status: 200})
	n, _ = p.Load()
	assert.Equal(t, 0, n)
}

// A gRPC call's own deadline (grpc-timeout) counts as the time left when
// the request has no TimeoutHeader; TimeoutHeader wins when both are
// there, and a Header of the operator's choice reads that field alone.
func TestDeadlineReadsGRPCTimeout(t *testing.T) {
	gate := newSwitch("g", true, &events{})
	p := newPipeline(t, Config{Gates: []Policy{gate}}, Host{Clock: newClock(ms).now})
	out := newReq("/pkg.Service/Method")
	out.Method = http.MethodPost
	out.Header = http.Header{GRPCTimeoutHeader: {"0m"}}
	require.Equal(t, Rejected, p.Decide(&out.Ticket))
	a, _ := out.Answer()
	assert.Equal(t, "deadline", a.Reason)

	both := newReq("/pkg.Service/Method")
	both.Method = http.MethodPost
	both.Header = http.Header{GRPCTimeoutHeader: {"0m"}, TimeoutHeader: {"200m"}}
	require.Equal(t, Admitted, p.Decide(&both.Ticket), "TimeoutHeader wins")
	p.Done(&both.Ticket, Outcome{Status: 200})

	get := newReq("/")
	get.Header = http.Header{GRPCTimeoutHeader: {"0m"}}
	require.Equal(t, Admitted, p.Decide(&get.Ticket), "gRPC calls are POSTs: a GET's grpc-timeout is not read")
	p.Done(&get.Ticket, Outcome{Status: 200})

	own := newPipeline(t, Config{Gates: []Policy{gate}, Deadline: DeadlineConfig{Header: "X-Left"}}, Host{Clock: newClock(ms).now})
	r := newReq("/pkg.Service/Method")
	r.Method = http.MethodPost
	r.Header = http.Header{GRPCTimeoutHeader: {"0m"}}
	require.Equal(t, Admitted, own.Decide(&r.Ticket), "a Header of the operator's own is read alone")
	own.Done(&r.Ticket, Outcome{Status: 200})
}
