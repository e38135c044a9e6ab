package shed_test

import (
	"fmt"
	"log"
	"time"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/shed"
)

// A latency shedder from 100 ms to 300 ms: once the requests that ended
// take 250 ms on average, it refuses 75% of the new ones. On a server it
// goes in admit.Config.Policies; here its outcomes are fed by hand and
// Interval Manual makes Refresh the only recomputation.
func ExampleNewLatency() {
	s, err := shed.NewLatency(shed.LatencyConfig{
		Lower:  100 * time.Millisecond,
		Upper:  300 * time.Millisecond,
		Window: shed.Window{MinSamples: 1},
		Config: shed.Config{Interval: shed.Manual},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = admit.Config{Policies: []admit.Policy{s}} // where it goes on a server

	for range 10 {
		s.Done(&admit.Attempt{}, admit.Outcome{Latency: 250 * time.Millisecond, Status: 200})
	}
	st := s.Refresh()
	fmt.Printf("mean %v over %d requests: refuse %.0f%% of new ones\n", st.Latency, st.Samples, 100*st.Reject)
	// Output: mean 250ms over 10 requests: refuse 75% of new ones
}

// The settings are checked: a band given in percent, as loadshed's is,
// is an error that names the field and the fraction to use.
func ExampleNewErrorRate() {
	_, err := shed.NewErrorRate(shed.ErrorRateConfig{Lower: 20, Upper: 100})
	fmt.Println(err)
	// Output:
	// shed: NewErrorRate: ErrorRateConfig.Lower is 20: use a fraction in [0, 1], not a percentage (20% is 0.2)
	// ErrorRateConfig.Upper is 100: use a fraction in [0, 1], not a percentage (100% is 1)
}
