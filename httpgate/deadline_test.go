package httpgate

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluice-go/sluice/admit"
)

// The middleware honours the time the caller left: none left is a
// not-started rejection, otherwise the handler's context ends then.
func TestDeadlineHeader(t *testing.T) {
	hs := newHarness(t, admit.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dl, ok := r.Context().Deadline(); ok {
			w.Header().Set("X-Left", time.Until(dl).String())
		}
	}))
	out := hs.get("/", admit.TimeoutHeader, "0n")
	assert.Equal(t, http.StatusServiceUnavailable, out.status)
	assert.Equal(t, "deadline", out.reason())
	assert.Equal(t, "1", out.header.Get("Sluice-Not-Started"))

	in := hs.get("/", admit.TimeoutHeader, "3S")
	assert.Equal(t, http.StatusOK, in.status)
	left, err := time.ParseDuration(in.header.Get("X-Left"))
	assert.NoError(t, err)
	assert.Greater(t, left, 2*time.Second)
	assert.LessOrEqual(t, left, 3*time.Second)

	assert.Empty(t, hs.get("/").header.Get("X-Left"))
}
