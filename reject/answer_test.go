package reject

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAnswer(t *testing.T) {
	a := NewAnswer(0, 1500*time.Millisecond, http.Header{"x-extra": {"yes"}})
	assert.Equal(t, http.StatusServiceUnavailable, a.Status())
	e := a.Count("busy")
	a.Count("busy")
	a.Count("queue-timeout")
	h := http.Header{}
	a.SetHeader(h, e, true)
	assert.Equal(t, "1", h.Get(NotStartedHeader))
	assert.Equal(t, "busy", h.Get(ReasonHeader))
	assert.Equal(t, "2", h.Get("Retry-After"))
	assert.Equal(t, "yes", h.Get("X-Extra"))
	assert.Equal(t, "text/plain; charset=utf-8", h.Get("Content-Type"))
	assert.Equal(t, "request not started: busy\n", e.Body)
	assert.Equal(t, "26", h.Get("Content-Length"))
	total, by := a.Counts()
	assert.Equal(t, int64(3), total)
	assert.Equal(t, map[string]int64{"busy": 2, "queue-timeout": 1}, by)

	none := NewAnswer(429, -1, nil)
	h = http.Header{}
	none.SetHeader(h, none.Count("x"), false)
	assert.Equal(t, 429, none.Status())
	assert.Empty(t, h.Get("Retry-After"))
	assert.Empty(t, h.Get("Content-Length"))
}

func TestReasonFieldsAreTheWireForm(t *testing.T) {
	a := NewAnswer(0, 0, http.Header{"X-Extra": {"a\r\nInjected: 1"}, "Bad Name": {"x"}})
	e := a.Count("busy")
	want := "Content-Length: 26\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\n" +
		"Sluice-Not-Started: 1\r\n" +
		"Sluice-Reject-Reason: busy\r\n" +
		"X-Extra: a  Injected: 1\r\n"
	assert.Equal(t, want, string(e.Fields))
	assert.Equal(t, "request not started: busy\n", e.Body)
	assert.Len(t, e.Body, 26)
}
