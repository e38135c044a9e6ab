package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/schedtest"
)

// The age limit is on by default, and its reads carry the kernel's stamps
// only while it is.
func TestAgeSettingsFromConfig(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	h := HTTPHandler(http.NotFoundHandler())
	for _, tc := range []struct {
		name   string
		adm    admit.Config
		maxAge time.Duration
	}{
		{"default", admit.Config{}, admit.DefaultMaxAge},
		{"explicit", admit.Config{MaxAge: 50 * time.Millisecond}, 50 * time.Millisecond},
		{"queue", admit.Config{Gates: []admit.Policy{gate.NewConcurrency(1)}, Queue: &admit.QueueOptions{}, MaxAge: 30 * time.Millisecond},
			30 * time.Millisecond},
		{"off", admit.Config{MaxAge: -1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: tc.adm})
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				assert.NoError(t, srv.Close(ctx))
			}()
			assert.Equal(t, tc.maxAge, srv.Stats().MaxAge)
			assert.Equal(t, tc.maxAge > 0, srv.stamps, "stamped reads exactly when the age limit applies")
		})
	}
}

// A configuration that cannot work is refused by Listen, naming the
// problem.
func TestListenRefusesAdmissionThatCannotWork(t *testing.T) {
	rt := schedtest.Runtime(t, 1)
	h := HTTPHandler(http.NotFoundHandler())
	_, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: admit.Config{Queue: &admit.QueueOptions{}}})
	assert.ErrorContains(t, err, "a queue needs a gate")

	other := schedtest.Runtime(t, 2)
	busy := gate.NewBusy(gate.BusyOptions{})
	srv, err := Listen(rt, "127.0.0.1:0", h, Config{Admission: admit.Config{Gates: []admit.Policy{busy}}})
	require.NoError(t, err)
	defer srv.Close(context.Background())
	_, err = Listen(other, "127.0.0.1:0", h, Config{Admission: admit.Config{Gates: []admit.Policy{busy}}})
	assert.ErrorContains(t, err, "another executor")

	_, err = Listen(nil, "127.0.0.1:0", h, Config{})
	assert.ErrorContains(t, err, "nil runtime")
	_, err = Listen(rt, "127.0.0.1:0", nil, Config{})
	assert.ErrorContains(t, err, "nil Handler")
}
