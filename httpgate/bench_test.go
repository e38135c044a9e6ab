package httpgate

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/internal/gatetest"
)

// benchCases are the middlewares whose decision overhead is measured, each
// admitting (but "reject", which refuses every request without a queue).
func benchCases(b *testing.B) []struct {
	name string
	wrap func(http.Handler) http.Handler
} {
	open := func() *gate.GoSched { return gatetest.GoSched(b, gate.GoSchedConfig{Fraction: 1e6}) }
	mw := func(cfg admit.Config) func(http.Handler) http.Handler {
		a, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(a.Close)
		return a.Wrap
	}
	gs := func(g ...admit.Policy) []admit.Policy { return g }
	return []struct {
		name string
		wrap func(http.Handler) http.Handler
	}{
		{"bare", func(h http.Handler) http.Handler { return h }},
		{"no-gate", mw(admit.Config{})},
		{"concurrency", mw(admit.Config{Gates: gs(gatetest.Concurrency(b, 1<<30))})},
		{"concurrency+queue", mw(admit.Config{Gates: gs(gatetest.Concurrency(b, 1<<30)), Queue: &admit.QueueConfig{}})},
		{"adaptive", mw(admit.Config{Gates: gs(gatetest.Adaptive(b, gate.AdaptiveConfig{MaxLimit: 1 << 20, InitialLimit: 1 << 20}))})},
		{"gosched", mw(admit.Config{Gates: gs(open())})},
		{"gosched+concurrency+queue", mw(admit.Config{Gates: gs(open(), gatetest.Concurrency(b, 1<<30)), Queue: &admit.QueueConfig{}})},
		{"reject", mw(admit.Config{Gates: gs(gatetest.Concurrency(b, 0))})},
	}
}

// BenchmarkMiddleware measures the middleware's overhead on a request to an
// empty handler, in process (httptest.NewRecorder, no network): "bare" is
// the handler alone, the others add the middleware with a gate that admits;
// "reject" is a whole rejection (headers and body written to the
// recorder).
func BenchmarkMiddleware(b *testing.B) {
	empty := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			h := c.wrap(empty)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			rec := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				rec.Body.Reset()
				h.ServeHTTP(rec, req)
			}
		})
	}
}

// BenchmarkMiddlewareParallel is the same with every P serving at once.
func BenchmarkMiddlewareParallel(b *testing.B) {
	empty := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			h := c.wrap(empty)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				rec := httptest.NewRecorder()
				for pb.Next() {
					rec.Body.Reset()
					h.ServeHTTP(rec, req)
				}
			})
		})
	}
}
