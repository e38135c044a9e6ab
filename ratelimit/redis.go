package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redisopt"
)

// Defaults of RedisConfig.
const (
	// DefaultRedisInterval is the time between two flushes to Redis.
	DefaultRedisInterval = 100 * time.Millisecond
	// DefaultRedisPrefix starts the name of every Redis key a RedisSync
	// writes.
	DefaultRedisPrefix = "sluice:rl:"
	// DefaultRedisMaxBatch is the most keys one flush sends or reads: about
	// 25 ms of a flush at 5 to 7 commands a key (docs/benchmarks.md), half
	// the default Timeout.
	DefaultRedisMaxBatch = 2048
)

// redisTTLMargin is added to the two windows a Redis counter must live for
// (its own and the next, where it is the previous window), for clocks that
// disagree a little and flushes that come late.
const redisTTLMargin = time.Second

// RedisConfig configures a RedisSync. The zero value flushes every 100 ms,
// gives each flush 50 ms, and names keys "sluice:rl:{key}:window".
type RedisConfig struct {
	// Interval is the time between two flushes: DefaultRedisInterval when
	// zero. Each flush is one pipelined round trip, whatever the number of
	// requests decided since the last one, so the load on Redis is about
	// 5 × (keys in use) / Interval commands a second per process (two
	// counters and the processes' sets, docs/design.md), and a shorter
	// Interval trades Redis load for accuracy (docs/benchmarks.md).
	Interval time.Duration

	// Timeout bounds one flush: Interval/2 when zero, and it must not
	// exceed Interval. A flush that takes longer is abandoned and counted
	// as a failure; its increments are sent again with the next one.
	Timeout time.Duration

	// Prefix starts every key name: DefaultRedisPrefix when empty. Limiters
	// that share a Prefix (and a Redis) share their counts, key for key, so
	// two limiters with different quotas or windows need different ones.
	Prefix string

	// MaxBatch is the most keys one flush sends or reads:
	// DefaultRedisMaxBatch when zero. A flush must end within the Timeout,
	// and its time grows with its keys (docs/benchmarks.md); past MaxBatch,
	// keys with increments to send go first, and the others wait for a
	// later flush (the order varies, so each gets its turn).
	MaxBatch int

	// Manual starts no goroutine: flushes happen only when Flush is called,
	// for a caller that runs its own loop (or a test, or a simulation).
	Manual bool
}

// RedisStats are a RedisSync's counters, from its start.
type RedisStats struct {
	// Flushes is the number of round trips to Redis (flushes with at least
	// one key to send or read), successful or not.
	Flushes int64
	// Failures is the number of those that failed in part or whole (Redis
	// down, slow past the Timeout, or answering with an error). The
	// increments Redis did not take were put back, to go with the next
	// flush.
	Failures int64
	// ConsecutiveFailures is the number of failed flushes since the last one
	// that succeeded: 0 while Redis answers.
	ConsecutiveFailures int64
	// KeysSynced is the number of times a key's global counts were read
	// back from Redis and given to the limiter.
	KeysSynced int64
	// CommandsSent is the number of Redis commands sent, in all the flushes.
	CommandsSent int64
	// Deferred is the number of times a key was left for a later flush
	// because the flush had RedisConfig.MaxBatch keys already.
	Deferred int64
	// TrackedKeys is the number of keys the last flush sent, read or left
	// for later: those with local increments in the current window or the
	// two before it.
	TrackedKeys int
	// LastError is the error of the last failed flush, nil if none failed;
	// LastErrorAt says when it ended.
	LastError   error
	LastErrorAt time.Time
	// LastSyncAt is when the last successful flush ended.
	LastSyncAt time.Time
}

// RedisSync makes a Limiter's quotas global: processes whose limiters
// share a Redis (and a RedisConfig.Prefix) count each key's requests
// together.
//
// A request is never decided with a call to Redis. The limiter decides on
// the global counts last read plus its own increments not yet flushed; a
// RedisSync goroutine, every Interval, takes those increments
// (Limiter.TakePending) and sends them in one pipelined round trip (one
// per node with a Redis Cluster): for each key, an atomic INCRBY of the
// counter of its window, named Prefix+"{"+key+"}:"+window (the window's
// number from the Unix epoch, so that every process names it alike; the
// braces put both of a key's counters in one Cluster slot), with a
// PEXPIRE of two windows and a second the first time this process sends
// to that counter, and a GET of each counter (this window's, the previous
// one's) that no INCRBY answers. Each process also counts itself in a set
// per key and window, Prefix+"{"+key+"}:"+window+":p", of the processes
// with increments in that window or the previous one (SADD of a random id
// per RedisSync, with the same PEXPIRE the first time), and reads the
// sizes of this window's set and the previous one's (SCARD): 2 commands
// a key and flush, and the SADD 1 more while the key has local
// increments. The counts read back are the whole cluster's and go to
// Limiter.SetGlobalShared with the larger set's size, which holds this
// process to its share of the room until the next flush. Keys with local
// increments in the current window or the two before it are read back
// every flush, whether or not they have increments to send, up to
// RedisConfig.MaxBatch keys a flush; other keys are not sent at all, so a
// process with no traffic sends nothing.
//
// When Redis is down or slower than the Timeout the flush fails: the
// increments Redis did not take go back to the limiter
// (Limiter.FlushFailed), which keeps deciding on the last global counts
// plus all its local ones, and the next flush sends them again. Nothing
// waits for Redis to come back and nothing else changes: the next flush
// that succeeds resumes. A flush that timed out after Redis applied its
// increments leads to counting them twice, which errs toward refusing.
//
// The client should be this RedisSync's own, or at least have
// ContextTimeoutEnabled (NewRedisSync checks go-redis's clients) and
// MaxRetries -1: the next flush is the retry.
//
// The quota can be exceeded by what the processes admit between two
// flushes, before each sees the others' increments (the share rule holds
// it to about a third of that for smooth load, less for bursts after a
// pause): see docs/design.md and docs/benchmarks.md ("Rate limits:
// distributed over Redis") for how much, by interval and number of
// processes.
type RedisSync struct {
	l        *Limiter
	client   redis.UniversalClient
	interval time.Duration
	timeout  time.Duration
	ttl      time.Duration
	prefix   string
	maxBatch int
	id       string // this RedisSync's member in the process sets

	flushMu sync.Mutex           // one flush at a time; guards what follows
	keys    map[string]*redisKey // the keys sent or read back
	batch   []*redisKey          // the keys of this flush, reused
	gen     uint64               // the number of the flush
	closed  bool                 // Close has flushed for the last time

	statsMu sync.Mutex // guards stats
	stats   RedisStats

	cancel context.CancelFunc // stops the goroutine
	done   chan struct{}      // closed when the goroutine has returned
	once   sync.Once          // Close's
	err    error              // Close's result
}

// redisKey is a key that a RedisSync sends or reads back, with the
// commands of the current flush.
type redisKey struct {
	key    string
	last   int64  // the last window with local increments
	ttlWin int64  // the last window whose counter this process gave a TTL
	gen    uint64 // the last flush that sent it, read it or left it for later
	// orphan is the window of a counter that an INCRBY created with no
	// PEXPIRE after it (Redis had lost the counter: a restart), to be
	// given its TTL by the next flush; math.MinInt64 when none.
	orphan       int64
	orphanExpire *redis.BoolCmd
	// setTTLWin and setOrphan are the same for the key's process sets.
	setTTLWin       int64
	setOrphan       int64
	setOrphanExpire *redis.BoolCmd

	// This flush's: the window whose counts go to SetGlobal, the
	// increments to send, and the commands that answer the counts of
	// window and window-1.
	window    int64
	incs      []redisIncrement
	cur, prev redisCount
	// This flush's SADD of this process to window's set (nil when it
	// admitted nothing in window or window-1) and the PEXPIRE after it,
	// and the SCARDs of the sets of window and window-1.
	sadd              *redis.IntCmd
	saddExpire        *redis.BoolCmd
	procCur, procPrev *redis.IntCmd
}

// processes is the number of processes active on the key, from this
// flush's SCARDs: the larger of the current window's set and the previous
// one's (early in a window, the processes that have not flushed in it yet
// are in the previous one's). 1 when either could not be read: the share
// rule is then lifted until the next flush.
func (k *redisKey) processes() int {
	cur, err := k.procCur.Result()
	if err != nil {
		return 1
	}
	prev, err := k.procPrev.Result()
	if err != nil {
		return 1
	}
	return int(max(cur, prev, 1))
}

// redisIncrement is one report of Limiter.TakePending, and the INCRBY
// that sends it, with the PEXPIRE that follows the first INCRBY of a
// window.
type redisIncrement struct {
	window int64
	delta  int64
	cmd    *redis.IntCmd
	expire *redis.BoolCmd
}

// redisCount is the command whose reply is a counter's value: an INCRBY
// (incr) when the flush sends increments for that window, a GET otherwise.
type redisCount struct {
	incr *redis.IntCmd
	get  *redis.StringCmd
}

// value is the counter's value in the reply, or the command's error (a
// missing counter, redis.Nil, is 0).
func (c redisCount) value() (int64, error) {
	if c.incr != nil {
		return c.incr.Result()
	}
	v, err := c.get.Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// NewRedisSync makes l's counts global through client and, unless
// opts.Manual, starts its goroutine, which flushes every opts.Interval
// until Close. It returns an error for a nil l or client, a Timeout longer
// than the Interval, or a go-redis client (Client, ClusterClient, Ring)
// without ContextTimeoutEnabled, which would let a flush outlast its
// Timeout by the client's own read timeout (3 s by default).
func NewRedisSync(l *Limiter, client redis.UniversalClient, opts RedisConfig) (*RedisSync, error) {
	if l == nil || client == nil {
		return nil, errors.New("ratelimit: NewRedisSync needs a limiter and a client")
	}
	if opts.Interval < 0 || opts.Timeout < 0 || opts.MaxBatch < 0 {
		return nil, fmt.Errorf("ratelimit: negative Redis interval (%v), timeout (%v) or batch (%d)", opts.Interval, opts.Timeout, opts.MaxBatch)
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = DefaultRedisMaxBatch
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultRedisInterval
	}
	if opts.Timeout == 0 {
		opts.Timeout = opts.Interval / 2
	}
	if opts.Timeout > opts.Interval {
		return nil, fmt.Errorf("ratelimit: Redis flush timeout %v is longer than the interval %v", opts.Timeout, opts.Interval)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultRedisPrefix
	}
	if !redisopt.ContextTimeoutEnabled(client) {
		return nil, fmt.Errorf("ratelimit: the Redis client needs ContextTimeoutEnabled for flushes to end within %v", opts.Timeout)
	}
	window := l.Window()
	if window <= 0 {
		return nil, fmt.Errorf("ratelimit: the limiter's window is %v", window)
	}
	s := &RedisSync{
		l:        l,
		client:   client,
		interval: opts.Interval,
		timeout:  opts.Timeout,
		ttl:      2*window + redisTTLMargin,
		prefix:   opts.Prefix,
		maxBatch: opts.MaxBatch,
		id:       strconv.FormatUint(rand.Uint64(), 36),
		keys:     make(map[string]*redisKey),
		done:     make(chan struct{}),
	}
	if opts.Manual {
		close(s.done)
		s.cancel = func() {}
		return s, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s, nil
}

// run flushes every interval until ctx ends. A flush that runs past a tick
// makes the ticker drop that tick, so flushes never queue up.
func (s *RedisSync) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Flush(ctx) // its error is in the stats
		}
	}
}

// Close stops the goroutine, waits for it to return, then flushes once
// more, so that the increments of the last interval reach Redis, and
// returns that flush's error. After Close, Flush does nothing. Close is
// safe to call more than once; it does not close the client.
func (s *RedisSync) Close() error {
	s.once.Do(func() {
		s.cancel()
		<-s.done
		s.err = s.Flush(context.Background())
		s.flushMu.Lock()
		s.closed = true
		s.flushMu.Unlock()
	})
	return s.err
}

// Flush sends the limiter's pending increments and reads back the global
// counts now, in one round trip bounded by the Timeout (and ctx), and
// returns its error, which the stats also record. It waits for a flush in
// progress to end first. The goroutine calls it every Interval; with
// RedisConfig.Manual only the caller does.
func (s *RedisSync) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.flush(ctx)
}

// flush is Flush, with flushMu held.
func (s *RedisSync) flush(ctx context.Context) error {
	now, _ := s.l.windowOf(s.l.clock())
	s.gen++

	// Take the increments; the limiter holds a lock meanwhile.
	s.l.TakePending(func(key string, window, delta int64) {
		k := s.keys[key]
		if k == nil {
			k = &redisKey{key: key, last: window, ttlWin: math.MinInt64, orphan: math.MinInt64,
				setTTLWin: math.MinInt64, setOrphan: math.MinInt64}
			s.keys[key] = k
		}
		k.last = max(k.last, window)
		k.incs = append(k.incs, redisIncrement{window: window, delta: delta})
	})

	// The keys of this flush: first those with increments to send, then
	// those only read back, up to maxBatch. A key left out keeps its
	// increments in flight until FlushFailed, below, puts them back; it
	// must not be given counts meanwhile (SetGlobal would take its
	// increments for sent).
	s.batch = s.batch[:0]
	var deferred int64
	for name, k := range s.keys {
		switch {
		case len(k.incs) > 0 && len(s.batch) < s.maxBatch:
			s.batch = append(s.batch, k)
		case len(k.incs) > 0:
			k.incs = k.incs[:0]
			deferred++
		case k.last < now-2:
			delete(s.keys, name) // its increments no longer count
			continue
		default:
			continue // read below, if there is room
		}
		k.gen = s.gen
	}
	for _, k := range s.keys {
		switch {
		case k.gen == s.gen:
		case len(s.batch) < s.maxBatch:
			k.gen = s.gen
			s.batch = append(s.batch, k)
		default:
			deferred++
		}
	}
	if len(s.batch) == 0 {
		s.record(0, 0, deferred, nil, 0)
		return nil
	}

	// One pipeline: per key, an INCRBY per window with increments (and a
	// PEXPIRE after the first of each window), and a GET of each counter,
	// this window's and the previous one's, that no INCRBY answers.
	pipe := s.client.Pipeline()
	var commands int64
	for _, k := range s.batch {
		k.window = max(now, k.last)
		k.cur, k.prev = redisCount{}, redisCount{}
		for i := range k.incs {
			inc := &k.incs[i]
			counter := s.counterName(k.key, inc.window)
			inc.cmd = pipe.IncrBy(ctx, counter, inc.delta)
			commands++
			if inc.window > k.ttlWin {
				inc.expire = pipe.PExpire(ctx, counter, s.ttl)
				commands++
			}
			switch inc.window {
			case k.window:
				k.cur.incr = inc.cmd
			case k.window - 1:
				k.prev.incr = inc.cmd
			}
		}
		if k.cur.incr == nil {
			k.cur.get = pipe.Get(ctx, s.counterName(k.key, k.window))
			commands++
		}
		if k.prev.incr == nil {
			k.prev.get = pipe.Get(ctx, s.counterName(k.key, k.window-1))
			commands++
		}
		k.orphanExpire = nil
		if k.orphan != math.MinInt64 {
			k.orphanExpire = pipe.PExpire(ctx, s.counterName(k.key, k.orphan), s.ttl)
			commands++
		}
		// The processes active on the key: this one joins the window's
		// set if it admitted anything in this window or the previous one.
		k.sadd, k.saddExpire = nil, nil
		if k.last >= k.window-1 {
			set := s.setName(k.key, k.window)
			k.sadd = pipe.SAdd(ctx, set, s.id)
			commands++
			if k.window > k.setTTLWin {
				k.saddExpire = pipe.PExpire(ctx, set, s.ttl)
				commands++
			}
		}
		k.setOrphanExpire = nil
		if k.setOrphan != math.MinInt64 {
			k.setOrphanExpire = pipe.PExpire(ctx, s.setName(k.key, k.setOrphan), s.ttl)
			commands++
		}
		k.procCur = pipe.SCard(ctx, s.setName(k.key, k.window))
		k.procPrev = pipe.SCard(ctx, s.setName(k.key, k.window-1))
		commands += 2
	}
	pipe.Exec(ctx) // its error is the first command's; each keeps its own

	// A key whose increments Redis took (every INCRBY answered) gives the
	// limiter its counts: one that could not be read goes as 0, which the
	// limiter takes as no news, since its counts never go down. The
	// increments of the other keys are still in flight: they go back to
	// pending, for the next flush.
	var synced, failed, resend int64
	var first error // the first command's error, redis.Nil aside
	for _, k := range s.batch {
		applied := true
		var kerr error
		if k.orphanExpire != nil {
			if kerr = k.orphanExpire.Err(); kerr == nil {
				k.orphan = math.MinInt64
			}
		}
		for i := range k.incs {
			inc := &k.incs[i]
			v, err := inc.cmd.Result()
			applied = applied && err == nil
			switch {
			case inc.expire == nil:
				if err == nil && v == inc.delta {
					k.orphan = inc.window
				}
			case inc.expire.Err() != nil:
				kerr = inc.expire.Err()
				k.orphan = inc.window
			default:
				k.ttlWin = max(k.ttlWin, inc.window)
			}
		}
		if k.setOrphanExpire != nil {
			if err := k.setOrphanExpire.Err(); err == nil {
				k.setOrphan = math.MinInt64
			} else {
				kerr = errors.Join(kerr, err)
			}
		}
		if k.sadd != nil {
			added, err := k.sadd.Result()
			switch {
			case err != nil:
				kerr = errors.Join(kerr, err)
			case k.saddExpire == nil:
				if added == 1 && k.setTTLWin == k.window {
					// This process had joined the set: Redis lost it,
					// and the SADD made it again with no TTL.
					k.setOrphan = k.window
				}
			case k.saddExpire.Err() != nil:
				kerr = errors.Join(kerr, k.saddExpire.Err())
				k.setOrphan = k.window
			default:
				k.setTTLWin = max(k.setTTLWin, k.window)
			}
		}
		cur, curErr := k.cur.value()
		prev, prevErr := k.prev.value()
		kerr = errors.Join(curErr, prevErr, kerr)
		switch {
		case !applied:
			resend++
		case len(k.incs) > 0 || curErr == nil || prevErr == nil:
			s.l.SetGlobalShared(k.key, k.window, cur, prev, k.processes())
		}
		if kerr == nil {
			synced++
		} else {
			failed++
			first = cmp.Or(first, kerr)
		}
		k.incs = k.incs[:0]
	}
	if resend > 0 || deferred > 0 {
		s.l.FlushFailed()
	}
	var err error
	if failed > 0 {
		err = fmt.Errorf("ratelimit: flushing %d keys to Redis, %d failed (%d to send again): %w", len(s.batch), failed, resend, first)
	}
	s.record(commands, synced, deferred, err, len(s.batch))
	clear(s.batch) // let removed keys go
	return err
}

// record adds a flush to the stats; commands is 0 for a flush that had
// nothing to send.
func (s *RedisSync) record(commands, synced, deferred int64, err error, keys int) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := &s.stats
	st.TrackedKeys = keys + int(deferred)
	st.Deferred += deferred
	if commands == 0 {
		return
	}
	st.Flushes++
	st.CommandsSent += commands
	st.KeysSynced += synced
	if err != nil {
		st.Failures++
		st.ConsecutiveFailures++
		st.LastError, st.LastErrorAt = err, time.Now()
		return
	}
	st.ConsecutiveFailures = 0
	st.LastSyncAt = time.Now()
}

// Stats returns the counters so far.
func (s *RedisSync) Stats() RedisStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

// setName is the Redis key of the set of the processes active on key in
// window: the counter's name followed by ":p".
func (s *RedisSync) setName(key string, window int64) string {
	return s.counterName(key, window) + ":p"
}

// counterName is the Redis key of key's counter for window.
func (s *RedisSync) counterName(key string, window int64) string {
	b := make([]byte, 0, len(s.prefix)+len(key)+24)
	b = append(b, s.prefix...)
	b = append(b, '{')
	b = append(b, key...)
	b = append(b, "}:"...)
	b = strconv.AppendInt(b, window, 10)
	return string(b)
}
