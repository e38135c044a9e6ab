package reject

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAnswer(t *testing.T) {
	a := NewAnswer("busy", http.StatusServiceUnavailable, 1500*time.Millisecond, http.Header{"x-extra": {"yes"}})
	assert.Equal(t, http.StatusServiceUnavailable, a.Status)
	assert.Equal(t, int64(2), a.RetryAfter)
	h := http.Header{}
	a.SetHeader(h, true, nil)
	assert.Equal(t, "1", h.Get(NotStartedHeader))
	assert.Equal(t, "busy", h.Get(ReasonHeader))
	assert.Equal(t, "2", h.Get("Retry-After"))
	assert.Equal(t, "yes", h.Get("X-Extra"))
	assert.Equal(t, "text/plain; charset=utf-8", h.Get("Content-Type"))
	assert.Equal(t, "request not started: busy\n", a.Body)
	assert.Equal(t, "26", h.Get("Content-Length"))

	none := NewAnswer("x", http.StatusTooManyRequests, -1, nil)
	h = http.Header{}
	none.SetHeader(h, false, nil)
	assert.Equal(t, 429, none.Status)
	assert.Equal(t, int64(-1), none.RetryAfter)
	assert.Empty(t, h.Get("Retry-After"))
	assert.Empty(t, h.Get("Content-Length"))
	assert.NotContains(t, string(none.Fields), "Retry-After")

	// A refusal's own fields come on top, with canonical names.
	h = http.Header{}
	none.SetHeader(h, true, http.Header{"ratelimit-remaining": {"0"}})
	assert.Equal(t, "0", h.Get("Ratelimit-Remaining"))
	assert.Equal(t, "1", h.Get(NotStartedHeader))

	zero := NewAnswer("x", 503, 0, nil)
	assert.Contains(t, string(zero.Fields), "Retry-After: 0\r\n", "zero is a value, not none")
}

func TestFieldsAreTheWireForm(t *testing.T) {
	a := NewAnswer("busy", 503, time.Second, http.Header{"X-Extra": {"a\r\nInjected: 1"}, "Bad Name": {"x"}})
	want := "Content-Length: 26\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\n" +
		"Sluice-Not-Started: 1\r\n" +
		"Sluice-Reject-Reason: busy\r\n" +
		"X-Extra: a  Injected: 1\r\n"
	assert.Equal(t, want, string(a.Fields))
	assert.Equal(t, "request not started: busy\n", a.Body)
	assert.Len(t, a.Body, 26)

	// A reason cannot split the answer either.
	evil := NewAnswer("x\r\nSet-Cookie: y", 503, -1, nil)
	assert.Contains(t, string(evil.Fields), "Sluice-Reject-Reason: x  Set-Cookie: y\r\n")
}
