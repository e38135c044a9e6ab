package admit

import (
	"testing"
	"time"
)

// BenchmarkDecideDone measures one request's passage through a pipeline, on
// one goroutine, as the server makes it: Decide, then Done. "age" reads a
// kernel stamp (the server's default), "gate" adds a gate that admits,
// "policy+gate" a policy too, and "rejected" is a gate's refusal without a
// queue, answer and counting included.
func BenchmarkDecideDone(b *testing.B) {
	open := &limit{max: 1 << 40}
	closed := &limit{max: 0}
	for _, c := range []struct {
		name  string
		cfg   Config
		stamp bool
	}{
		{"age", Config{}, true},
		{"no-age", Config{MaxAge: -1}, false},
		{"gate", Config{Gates: []Policy{open}}, true},
		{"policy+gate", Config{Policies: []Policy{&limit{max: 1 << 40}}, Gates: []Policy{open}}, true},
		{"rejected", Config{Gates: []Policy{closed}}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			p, err := New(c.cfg, Host{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			var t Ticket
			t.Method, t.Path = "GET", "/"
			stamp := time.Now().UnixNano()
			b.ReportAllocs()
			for b.Loop() {
				if c.stamp {
					t.Stamp = stamp
				}
				if p.Decide(&t) == Admitted {
					p.Done(&t, Outcome{Status: 200})
				}
			}
		})
	}
}
