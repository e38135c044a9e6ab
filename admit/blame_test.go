package admit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
)

// blameRecorder is a policy that reads blame, per request path.
type blameRecorder struct {
	uses  bool
	blame map[string]time.Duration
	ended map[string]int
}

func (b *blameRecorder) Admit(*admit.Attempt) *admit.Refusal { return nil }
func (b *blameRecorder) Done(a *admit.Attempt, o admit.Outcome) {
	if !o.Canceled {
		b.blame[a.Path] += o.Blame
		b.ended[a.Path]++
	}
}
func (b *blameRecorder) UsesBlame() bool { return b.uses }

// TestBlameInPipeline runs Alice's many short requests beside Bob's few
// long ones through a pipeline with two slots, on a fake clock: the gates
// are closed whenever both slots are taken and someone was refused, and
// Bob, whose requests hold a slot 20 times as long, takes the blame.
func TestBlameInPipeline(t *testing.T) {
	for _, uses := range []bool{true, false} {
		var now int64 = 1
		rec := &blameRecorder{uses: uses, blame: map[string]time.Duration{}, ended: map[string]int{}}
		p, err := admit.New(admit.Config{
			Policies: []admit.Policy{rec},
			Gates:    []admit.Policy{gatetest.Concurrency(t, 2)},
			MaxAge:   -1,
		}, admit.Host{Clock: func() int64 { return now }})
		require.NoError(t, err)

		type running struct {
			t   *admit.Ticket
			end int64
		}
		var live []running
		try := func(path string, cost int64) {
			tk := &admit.Ticket{}
			tk.Path = path
			if p.Decide(tk) == admit.Admitted {
				live = append(live, running{tk, now + cost})
			}
		}
		// Each microsecond, Alice sends a 10 µs request with probability
		// 0.1 and Bob a 200 µs one with probability 0.01: Alice sends 10x
		// Bob's rate at 1/20 of his cost. Her requests keep one slot busy
		// on average, his two: 1.5x the two slots.
		rng := rand.New(rand.NewPCG(5, 6))
		for tick := int64(0); tick < 2_000_000; tick++ {
			now = 1 + tick*1000
			kept := live[:0]
			for _, r := range live {
				if r.end <= now {
					p.Done(r.t, admit.Outcome{Status: 200})
				} else {
					kept = append(kept, r)
				}
			}
			live = kept
			if rng.IntN(100) == 0 {
				try("/bob", 200_000)
			}
			if rng.IntN(10) == 0 {
				try("/alice", 10_000)
			}
		}
		st := p.Stats()
		p.Close()
		if !uses {
			assert.Zero(t, rec.blame["/bob"]+rec.blame["/alice"], "no policy reads blame: none measured")
			continue
		}
		require.Positive(t, st.GatesClosed)
		total := rec.blame["/bob"] + rec.blame["/alice"]
		// Every closed moment with requests running is handed out; the
		// gates count as closed from a refusal to the next admission, which
		// can include moments when everything had ended.
		assert.LessOrEqual(t, total, st.GatesClosed+time.Microsecond)
		assert.Greater(t, total, st.GatesClosed*9/10)
		perBob := float64(rec.blame["/bob"]) / float64(rec.ended["/bob"])
		perAlice := float64(rec.blame["/alice"]) / float64(rec.ended["/alice"])
		t.Logf("closed %v; blame: Bob %v over %d requests, Alice %v over %d", st.GatesClosed, rec.blame["/bob"], rec.ended["/bob"], rec.blame["/alice"], rec.ended["/alice"])
		assert.Greater(t, rec.blame["/bob"], 4*rec.blame["/alice"], "Bob takes most of the blame: %v", rec.blame)
		assert.Greater(t, perBob, 10*perAlice, "per request, Bob's is much larger")
	}
}
