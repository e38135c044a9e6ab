//go:build linux

// The busy-worker gate counts the executor's busy workers, so its example
// runs a sluice server on the executor: Linux only. Elsewhere sluice.Listen
// refuses the gate (it serves on net/http there), and the example would
// fail.

package gate_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/gate"
	srt "github.com/sluice-go/sluice/runtime"
)

// The busy-worker gate gets its executor when the server starts: on 2
// workers, half busy means a request is admitted while the other worker is
// idle.
func ExampleNewBusy() {
	busy, err := gate.NewBusy(gate.BusyConfig{Fraction: 0.5})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := sluice.Listen("127.0.0.1:0", http.NotFoundHandler(), sluice.Config{
		Admission: admit.Config{Gates: []admit.Policy{busy}, Queue: &admit.QueueConfig{}},
		Runtime:   srt.Config{Workers: 2, Pinning: srt.PinOff},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(context.Background())
	fmt.Println("busy workers allowed, the deciding one included:", busy.Limit())
	// Output:
	// busy workers allowed, the deciding one included: 1
}
