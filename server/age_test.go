package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/queue"
)

func TestAgeLimitFollowsCoDel(t *testing.T) {
	ms := int64(time.Millisecond)
	srv := &Server{maxAge: 100 * ms, ageTarget: 5 * ms, ageInterval: 100 * ms, ageExit: 10 * ms}
	ws := &workerState{}
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 1*ms, 0), "young: the full limit")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 20*ms, 10*ms), "first old one starts the interval")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 30*ms, 60*ms), "old for less than an interval")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 2*ms, 70*ms), "a young one restarts it")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 20*ms, 80*ms))
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 30*ms, 170*ms), "old for less than an interval since the young one")
	assert.Equal(t, 5*ms, srv.ageLimit(ws, 30*ms, 180*ms), "old for an interval: standing, the target applies")
	assert.Equal(t, 5*ms, srv.ageLimit(ws, 8*ms, 190*ms))
	// Under overload the fresh requests it serves are young: they do not
	// end the standing state while old ones keep coming.
	for now := 200 * ms; now < 400*ms; now += ms {
		age := 3 * ms
		if now/ms%2 == 1 {
			age = 40 * ms
		}
		require.Equal(t, 5*ms, srv.ageLimit(ws, age, now), "at %d ms", now/ms)
	}
	assert.Equal(t, 5*ms, srv.ageLimit(ws, 2*ms, 400*ms), "young since 400 ms")
	assert.Equal(t, 5*ms, srv.ageLimit(ws, 1*ms, 409*ms), "young for less than the exit time")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 2*ms, 410*ms), "young for the exit time: the standing queue is gone")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 30*ms, 420*ms), "and a new interval must pass")
	assert.Equal(t, 100*ms, srv.ageLimit(ws, 30*ms, 519*ms))
	assert.Equal(t, 5*ms, srv.ageLimit(ws, 30*ms, 520*ms))

	plain := &Server{maxAge: 100 * ms}
	assert.Equal(t, 100*ms, plain.ageLimit(ws, 30*ms, 10_000*ms), "no CoDel: MaxAge only")
}

func TestAgeSettingsFromConfig(t *testing.T) {
	s := schedtest.Start(t, 1)
	h := HTTPHandler(http.NotFoundHandler())
	for _, tc := range []struct {
		name           string
		cfg            Config
		maxAge, target time.Duration
		pumpsAll       bool
	}{
		{"no queue", Config{}, 0, 0, false},
		{"max age alone", Config{MaxAge: 50 * time.Millisecond}, 50 * time.Millisecond, 0, false},
		{"queue timeout", Config{Gate: gate.NewConcurrency(1), Queue: &queue.Options{Timeout: 30 * time.Millisecond}},
			30 * time.Millisecond, 0, true},
		{"default timeout, busy gate", Config{Gate: gate.NewBusy(s, gate.BusyOptions{}), Queue: &queue.Options{}},
			queue.DefaultTimeout, 0, false},
		{"codel", Config{Gate: gate.NewBusy(s, gate.BusyOptions{Isolated: true}), Queue: &queue.Options{Order: queue.CoDel}},
			queue.DefaultTimeout, queue.DefaultTarget, false},
		{"off", Config{Gate: gate.NewConcurrency(1), Queue: &queue.Options{}, MaxAge: -1}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Listen(s, "127.0.0.1:0", h, tc.cfg)
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				assert.NoError(t, srv.Close(ctx))
			}()
			assert.Equal(t, int64(tc.maxAge), srv.maxAge)
			assert.Equal(t, int64(tc.target), srv.ageTarget)
			if tc.target > 0 {
				assert.Equal(t, int64(queue.DefaultInterval), srv.ageInterval)
				assert.Equal(t, int64(queue.DefaultInterval/ageExitDivisor), srv.ageExit)
			}
			assert.Equal(t, tc.pumpsAll, srv.pumpAll, "a concurrency gate reserves slots; the busy gate does not")
		})
	}
}
