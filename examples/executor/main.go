// Command executor is the smallest useful program on the sluice executor: it
// starts one worker per CPU, registers a Background lane, runs a few
// request-like coroutines that Await a slow call without holding their
// worker, and prints the lane counters.
//
//	go run ./examples/executor
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/sluice-go/sluice/lanes"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
)

func main() {
	rt, err := srt.New(srt.Config{}) // one worker per usable CPU (pinned on an exclusive cpuset)
	if err != nil {
		log.Fatal(err)
	}
	// A lane below the built-in ones: it runs when they are empty, or when
	// the starvation guard lets it.
	background, err := rt.RegisterLane(lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		// A request: new work, so it enters through the Upstream lane.
		err := rt.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
			defer wg.Done()
			// The worker is free for other work while this waits; the
			// rest of the function resumes on the same worker, in the
			// Continuation lane, ahead of new requests.
			v, err := sched.Await(ctx, func(ctx context.Context) (string, error) {
				time.Sleep(20 * time.Millisecond) // a database call, say
				return "row", nil
			})
			if err != nil {
				log.Print(err)
				return
			}
			_ = v
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	wg.Add(1)
	if err := rt.Submit(background, func() { defer wg.Done() }); err != nil {
		log.Fatal(err)
	}
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	snap := rt.Snapshot()
	fmt.Printf("%d workers on CPUs %v\n", len(snap.Workers), rt.CPUs())
	for _, l := range snap.Lanes {
		fmt.Printf("lane %-12s ran %3d tasks, waited %v in all\n", l.Name, l.Run, time.Duration(l.WaitedNs))
	}
}
