package tenant_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/tenant"
)

// The control loop by hand: a controller reads an overloaded fleet's
// report, the tracker applies its table, and the heavy tenant's requests
// are dropped evenly, the light tenant's not at all. An Agent does the
// same once a period, through a store.
func Example() {
	tr, _ := tenant.New(tenant.Config{}) // tenants named by X-Tenant
	ctrl, _ := tenant.NewController(tenant.ControllerConfig{})

	send := func(name string, n int) (dropped int) {
		a := &admit.Attempt{Header: http.Header{"X-Tenant": {name}}}
		for range n {
			if tr.Admit(a) != nil {
				dropped++
				continue
			}
			tr.Done(a, admit.Outcome{Latency: time.Millisecond})
		}
		return dropped
	}
	send("heavy", 10)
	send("light", 10)
	tr.Collect(time.Second) // both are followed by name from now on

	// A second of overload, as the fleet's servers reported it: heavy
	// caused 90% of the closed time and had 5 of 6 requests rejected. Its
	// demand is 0.9 × 5400/900 = 5.4 times the capacity served, light's
	// 0.1 × 120/100 = 0.12. The controller shares out 0.97 of the
	// capacity (ControllerConfig.Utilisation): light is met, heavy gets
	// the other 0.85.
	table := ctrl.Step([]tenant.Report{{
		Server: "s1", Period: time.Second, Closed: time.Second,
		Tenants: []tenant.Usage{
			{Tenant: "heavy", Requests: 5400, Admitted: 900, Rejected: 4500, Blame: 900 * time.Millisecond},
			{Tenant: "light", Requests: 120, Admitted: 100, Rejected: 20, Blame: 100 * time.Millisecond},
		},
	}})
	fmt.Println(ctrl.Last().State)
	fmt.Printf("heavy's drop fraction: %.3f\n", table.Drops["heavy"])
	_ = tr.Apply(table)

	fmt.Println("heavy dropped:", send("heavy", 1000), "of 1000")
	fmt.Println("light dropped:", send("light", 1000), "of 1000")
	// Output:
	// overloaded
	// heavy's drop fraction: 0.843
	// heavy dropped: 842 of 1000
	// light dropped: 0 of 1000
}
