// Package await holds waits that release the worker: drop-in wrappers for
// the blocking calls that ordinary handler code makes, so that such code lets
// its sluice worker serve other requests while it waits, without being
// rewritten, and the recipe for any other blocking call.
//
// Handler code waits on services through an http.Client and on databases
// through database/sql. With a client from NewClient (or a Transport) and a
// database from Open or OpenDB (a DB, whose driver connector is wrapped by
// Connector), each round trip, body read, wait for a pooled connection,
// connect, query, row fetch, commit and so on goes through sched.Await:
// called from a coroutine's own code (a handler started with Worker.Go,
// Worker.GoNow or Scheduler.Go, or code it calls with its context or one
// derived from it), the wait runs on another goroutine, the worker stops
// counting as busy and serves other work, and the handler resumes on the
// same worker once the wait is over. Called anywhere else (a plain
// goroutine, a context that did not come from a coroutine) the wrappers
// block in place, exactly like what they wrap.
//
// The wrappers find the coroutine through the context, so the handler's
// context must reach them: build requests with http.NewRequestWithContext
// (http.Client.Get and Post use context.Background and so hold the worker),
// and use the Context methods of database/sql (QueryContext, ExecContext,
// QueryRowContext, BeginTx, PrepareContext, PingContext), not Query, Exec,
// Begin and so on.
//
// Blocking that goes around these wrappers (a plain time.Sleep, a raw socket
// read, a channel receive, a client or driver used directly) holds the worker
// for the whole wait. That is the isolated model: it still works, but the
// throughput of a worker pool is then capped at workers / wait time, so two
// workers and a handler that blocks 10 ms serve at most 200 requests per
// second. Use Sleep instead of time.Sleep, and sched.Await for any other
// wait, as the next section shows.
//
// Do not hold a lock (a sync.Mutex, say) across one of these waits if
// another handler may need it: while the holder waits it is suspended and can
// only resume on its own worker, so a second handler on that worker that
// blocks on the lock blocks the worker's thread, and neither can go on.
// database/sql does this itself in a few places, as DB explains.
//
// Errors are those of the wrapped client or driver, unchanged, so that
// comparisons such as err == io.EOF or err == driver.ErrSkip keep working.
// The one addition is an error matching sched.ErrStopped when the scheduler
// cancels the waiting handler (see sched.Scheduler.Stop); a wrapped call
// that was under way then goes on in the background, and what it returns is
// released (a response body or result set closed, a transaction rolled back,
// a connection closed).
//
// # Any other blocking call
//
// A client this package has no wrapper for (a Redis or message-queue
// client, a cloud SDK, a gRPC stub, a blocking system call) releases the
// worker the same way: the handler puts the call in a function and gives it
// to sched.Await, with its own context.
//
//	greeting, err := sched.Await(r.Context(), func(ctx context.Context) (string, error) {
//		return rdb.Get(ctx, key).Result() // go-redis; runs off the worker
//	})
//
// The function runs on another goroutine while the worker serves other
// work, and the handler resumes on its worker with the function's results;
// outside a coroutine Await simply calls the function. The client's own
// waits (for a connection from its pool, a dial, a retry's back-off) are
// part of the call and so wait off the worker too. A few rules keep such a
// wrapper correct:
//
//   - Give the client the context the function receives (Await passes it
//     the one it was given), so that the handler's deadline and
//     cancellation still reach the call.
//   - Hand results back as the function's return values, not by assigning
//     to the handler's variables: if the scheduler stops the handler while
//     the call runs, Await returns sched.ErrStopped at once and drops the
//     results, and the function goes on running, concurrently with
//     whatever the handler does next.
//   - For the same reason, release inside the function what the call
//     opens (read and close a response body, close an iterator or a
//     stream), and return plain values: a resource handed back through
//     Await leaks when the handler is stopped during the call.
//   - Each Await costs a trip off the worker and back: put calls that follow
//     one another with no work in between (a pipeline, a transaction, a
//     retry loop) in one function, and leave calls that never wait (a
//     lookup in memory) in place.
//   - The client's errors come back unchanged, so errors.Is(err, redis.Nil)
//     and the like keep working; Await adds only sched.ErrStopped.
//
// The package's Redis example shows this in a handler, with go-redis.
//
// # Off Linux
//
// There is no executor off Linux, hence no coroutine: the wrappers block in
// place, as plain calls, and sched.Await runs its operation on the calling
// goroutine.
package await

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/sched"
)

// Sleep pauses for d or until ctx ends, whichever comes first, and returns
// ctx's error in the second case. It is sched.Sleep: in a coroutine it waits
// on the worker's timer and releases the worker meanwhile, where time.Sleep
// would hold it; elsewhere it blocks the caller. It returns
// sched.ErrStopped if the scheduler cancels the coroutine.
func Sleep(ctx context.Context, d time.Duration) error {
	return sched.Sleep(ctx, d)
}
