package queue

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassFromHeader(t *testing.T) {
	const name = "X-Sluice-Priority"
	for v, want := range map[string]Class{
		"critical":    Critical,
		"CRITICAL":    Critical,
		" Critical ":  Critical,
		"default":     Default,
		"Sheddable":   Sheddable,
		"sheddable\t": Sheddable,
		"":            Default,
		"urgent":      Default,
		"0":           Default,
		"critical,x":  Default,
	} {
		h := http.Header{}
		h.Set(name, v)
		assert.Equal(t, want, ClassFromHeader(h, name), "%q", v)
	}
	assert.Equal(t, Default, ClassFromHeader(http.Header{}, name), "missing")
	h := http.Header{}
	h.Add("x-sluice-priority", "sheddable")
	h.Add("x-sluice-priority", "critical")
	assert.Equal(t, Sheddable, ClassFromHeader(h, "x-SLUICE-priority"), "first value, canonical name")

	c, ok := ParseClass("nope")
	assert.False(t, ok)
	assert.Equal(t, Default, c)
}
