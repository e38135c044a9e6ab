package scenario

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/bench"
	"github.com/sluice-go/sluice/examples/weather"
)

func TestPanicking(t *testing.T) {
	h := panicking(3, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	call := func() (body string, panicked any) {
		rec := httptest.NewRecorder()
		func() {
			defer func() { panicked = recover() }()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/forecast", nil))
		}()
		return rec.Body.String(), panicked
	}
	var got []string
	for range 6 {
		body, p := call()
		switch {
		case p == nil:
			got = append(got, body)
		case body == "":
			assert.Equal(t, SoakPanicValue, p)
			got = append(got, "panic before")
		default:
			got = append(got, "panic after "+body)
		}
	}
	assert.Equal(t, []string{"ok", "ok", "panic before", "ok", "ok", "panic after ok"}, got)
}

// The soak hook serves the large answer and panics on every PanicEvery-th
// forecast; the weather service alone does neither.
func TestSoakChildHandler(t *testing.T) {
	get := func(h http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	plain := weather.Handler(bench.HandlerSpec{}.Options())
	assert.Equal(t, http.StatusNotFound, get(plain, SoakLargePath).Code, "only a soak serves the large answer")
	assert.Equal(t, http.StatusOK, get(plain, bench.WeatherPath).Code, "and only a soak panics")

	cs := bench.ChildSpec{}
	require.NoError(t, cs.SetHook("soak", soakChild{PanicEvery: 2}))
	part, err := (&Soak{}).ChildHook().Open(cs, plain)
	require.NoError(t, err)
	soak := part.Handler
	rec := get(soak, SoakLargePath)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, SoakLargeSize, rec.Body.Len())
	assert.Equal(t, http.StatusNotFound, get(soak, "/elsewhere").Code)
	assert.Equal(t, http.StatusOK, get(soak, bench.WeatherPath).Code)
	assert.PanicsWithValue(t, SoakPanicValue, func() { get(soak, bench.WeatherPath) }, "the second request")
}
