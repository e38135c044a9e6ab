package tenant

import (
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
)

// BenchmarkTenantCost measures what tenant tracking adds to one request's
// passage through a pipeline with a gate that admits (Decide, then Done):
// "none" is the pipeline alone, "tracked" adds the Tracker (blame measured,
// the tenant followed by name), "other" a tenant pooled under Other,
// "dropping" a tenant with a drop fraction in force (1%). As on the sluice
// server, the pipeline has a counter shard per P and each goroutine (a
// worker) counts in its own. Compare the ns/op of the runs in one
// invocation: go test -run '^$' -bench TenantCost ./tenant. As on the
// server, the tenant's field comes picked out of the head
// (admit.Attempt.Picked) when the pipeline asks for it.
func BenchmarkTenantCost(b *testing.B) {
	for _, c := range []struct {
		name, tenant string
		track        bool
		drop         float64
	}{
		{"none", "t3", false, 0},
		{"tracked", "t3", true, 0},
		{"other", "unknown", true, 0},
		{"dropping", "t3", true, 0.01},
	} {
		b.Run(c.name, func(b *testing.B) {
			// No age limit: the benchmark's requests have no kernel stamp.
			cfg := admit.Config{Gates: []admit.Policy{gatetest.Concurrency(b, 1<<20)}, MaxAge: -1}
			if c.track {
				tr, err := New(Config{})
				if err != nil {
					b.Fatal(err)
				}
				h := http.Header{}
				for i := range 10 {
					h.Set("X-Tenant", fmt.Sprintf("t%d", i))
					a := &admit.Attempt{Header: h}
					for range nameAfter {
						tr.Admit(a)
					}
				}
				tr.Collect(time.Second)
				if err := tr.Apply(Table{Version: 1, Drops: map[string]float64{c.tenant: c.drop}}); err != nil {
					b.Fatal(err)
				}
				cfg.Policies = []admit.Policy{tr}
			}
			p, err := admit.New(cfg, admit.Host{Shards: runtime.GOMAXPROCS(0)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			var workers atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				var t admit.Ticket
				t.Shard = int(workers.Add(1) - 1)
				t.Method, t.Path = "GET", "/"
				t.Header = http.Header{"X-Tenant": {c.tenant}}
				// As the sluice server does: the fields the pipeline
				// asks for (the deadline's, the tracker's key) picked
				// out of the head.
				for _, name := range p.PickedHeaders() {
					t.Picked = append(t.Picked, admit.Field{Name: name, Value: t.Header.Get(name)})
				}
				for pb.Next() {
					if p.Decide(&t) == admit.Admitted {
						p.Done(&t, admit.Outcome{Status: 200})
					}
				}
			})
		})
	}
}
