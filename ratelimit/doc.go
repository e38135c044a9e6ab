// Package ratelimit enforces quotas: so many requests (or bytes, or any
// units) per window per key, where a key is an API key, a tenant, a
// client's address, or anything a function of the request gives. Overload
// protection (package gate) answers "the server is full"; a quota answers
// "you have used your share", whether or not the server is full.
//
// # Use
//
// A Limiter counts; a Policy puts it in the admission pipeline (package
// admit), where it is asked before the overload gates, so that a request
// over its quota is refused at once and never waits in the queue:
//
//	lim, err := ratelimit.New(ratelimit.Config{
//		Window:    time.Minute,
//		Quota:     600,                            // per key per minute
//		Overrides: map[string]int64{"partner": 6000}, // per-key quotas
//	})
//	if err != nil { ... }
//	quota, err := ratelimit.NewPolicy(lim, ratelimit.PolicyConfig{
//		Key: admit.HeaderKey("X-Api-Key"), // or admit.ClientIP(), admit.KeyFunc(...)
//	})
//	if err != nil { ... }
//	busy, err := gate.NewBusy(gate.BusyConfig{Fraction: 0.5})
//	if err != nil { ... }
//	cfg := admit.Config{
//		Policies: []admit.Policy{quota},
//		Gates:    []admit.Policy{busy},
//		Queue:    &admit.QueueConfig{},
//	}
//	// sluice.Config{Admission: cfg}, or httpgate.New(cfg) for net/http
//
// A refused request is answered 429 Too Many Requests, unstarted (safe to
// retry later), with the fields every rejection has (Sluice-Not-Started,
// Sluice-Reject-Reason: rate-limit), Retry-After, and the RateLimit-Policy
// and RateLimit fields of the IETF draft, which name the quota and say
// what remains and when it has room again (see Policy). Several quotas are
// several policies (requests per minute and bytes per hour, say); one that
// admits a request a later one refuses gets its units back.
//
// A handler can also call a Limiter directly: Allow, AllowN (n units),
// Charge (units already used, such as the bytes of a body read after the
// request was admitted), Refund.
//
// # The algorithm
//
// A sliding window over two fixed windows per key, as chapter 28 of
// "Understanding Distributed Systems" describes it: each key has a counter
// for the current window and one for the previous window, and the count
// under the sliding window is the current counter plus the previous one
// weighted by the part of the previous window that the sliding window
// still covers. 75% into a window, a key with 80 requests in the previous
// window and 30 in this one counts 30 + 80 × 0.25 = 50. A request fits if
// the count plus its cost is at most the quota; only requests that fit are
// counted (a client that keeps sending over its quota keeps getting the
// quota, not less). The weighting assumes the previous window's requests
// were spread evenly: a burst at its end weighs less than it should, by
// up to half the quota over a part of a window (docs/benchmarks.md has
// the measured figures).
//
// # Memory
//
// Each key costs a fixed amount (about 200 bytes with its table slot and
// a short key), whatever its traffic, and the number of keys is bounded
// (Config.MaxKeys). A key whose counts have all left the sliding window is
// idle: it is forgotten as new keys arrive (and by Sweep). A new key that
// finds its shard full of keys in use does not push one out, which would
// hand that key a fresh quota; it is counted in the shard's overflow
// bucket, shared by all such keys (Config.Overflow). A flood of random keys
// therefore grows nothing, takes nothing from the keys already counted,
// and gets one bucket's quota between all of them.
//
// # Cost
//
// A decision reads the clock once, hashes the key once, and takes one lock
// among many (the key table is sharded, 8 shards per CPU); it allocates
// nothing for a key already counted, nor does a Policy keying by address
// or header. docs/benchmarks.md compares it with golang.org/x/time/rate.
//
// # Quota tables
//
// Quotas for many keys (up to ReloadConfig.MaxKeys, 100,000 by default)
// live in one table that whoever owns the configuration rewrites whole
// (AppendTable writes it: a versioned text file with a CRC-32C), and a
// Reloader reads it whole every period from a TableSource (FileSource, or
// a store's value), checks it, and swaps it in atomically: the same work
// whether one quota changed or all of them, and a corrupt or cut table is
// refused, counted, and changes nothing.
//
// # Distributed mode
//
// A Limiter counts one process's requests. To share quotas across
// processes, a store adapter (this package's Redis syncer) runs beside it:
// every interval it takes the increments not yet sent (TakePending),
// adds them to the store in one batch, and records the cluster-wide counts
// it reads back with the number of processes active on each key
// (SetGlobalShared), or puts them back when the store failed
// (FlushFailed). Decisions then count the store's last counts plus this
// process's increments not yet in them, and never wait for the store;
// between two syncs of a key that n > 1 processes use, each admits at most
// 1/n of the room it last saw, so that together they stay within it. The
// window index is Clock()/Window, so processes need the same Window and
// clocks that agree (the default clock is Unix time).
package ratelimit
