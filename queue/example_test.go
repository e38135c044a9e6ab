package queue_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/queue"
)

// The callback core, as the sluice server uses it: a gate with one slot,
// three requests, and a Pump whenever a request ends.
func ExampleQueue() {
	var now int64 // a fake clock, in nanoseconds
	q := queue.New(queue.Config{Clock: func() int64 { return now }})
	free := 1
	admit := func(*queue.Entry) bool {
		if free == 0 {
			return false
		}
		free--
		return true
	}
	type request struct {
		queue.Entry // embedded: Push allocates nothing
		name        string
	}
	handle := func(r *request, c queue.Class) {
		if q.Len() == 0 && admit(nil) { // nobody waits and the gate is open
			fmt.Println("start", r.name)
			return
		}
		q.Push(&r.Entry, c,
			func() { fmt.Println("start", r.name, "after waiting") },
			func(why queue.Reason) { fmt.Println("reject", r.name, why) })
		q.Pump(admit) // the gate may have opened meanwhile
	}

	handle(&request{name: "a"}, queue.Default)
	handle(&request{name: "b"}, queue.Sheddable)
	handle(&request{name: "c"}, queue.Critical)

	now += int64(10 * time.Millisecond)
	free++ // a ends
	q.Pump(admit)

	now += int64(100 * time.Millisecond)
	q.Expire() // b's deadline has passed

	// Output:
	// start a
	// start c after waiting
	// reject b timeout
}

// A net/http middleware on Wait: goroutines block on the queue, a limit of
// 64 concurrent requests is the gate, and one time.Timer, kept set by Arm,
// runs Expire.
func ExampleQueue_Wait() {
	var inFlight atomic.Int64
	tryAcquire := func(*queue.Entry) bool {
		if inFlight.Add(1) <= 64 {
			return true
		}
		inFlight.Add(-1)
		return false
	}
	var q *queue.Queue
	var timer *time.Timer
	q = queue.New(queue.Config{
		Order: queue.CoDel,
		Admit: tryAcquire,
		Arm:   func(at int64) { timer.Reset(time.Duration(at - q.Now())) },
	})
	timer = time.AfterFunc(time.Hour, func() { q.Expire() })

	middleware := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if q.Len() > 0 || !tryAcquire(nil) {
				c := queue.ClassFromHeader(r.Header, "X-Priority")
				if err := q.Wait(r.Context(), c); err != nil {
					if errors.Is(err, queue.ErrRejected) {
						w.Header().Set("Retry-After", "1")
						http.Error(w, "overloaded, not started, safe to retry", http.StatusServiceUnavailable)
					}
					return
				}
			}
			defer func() {
				inFlight.Add(-1)
				q.Pump(tryAcquire) // the slot just freed goes to the head
			}()
			next.ServeHTTP(w, r)
		})
	}
	_ = middleware
}
