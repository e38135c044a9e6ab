package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redisopt"
)

// Defaults of RedisConfig.
const (
	// DefaultRedisPrefix starts the name of every key a RedisStore uses.
	DefaultRedisPrefix = "sluice:tenant:"
	// DefaultRedisFleet is the fleet a RedisStore serves when
	// RedisConfig.Fleet is empty.
	DefaultRedisFleet = "default"
)

// redisIndexGrace is how long a server stays in the index of reports after
// its report's expiry (by the clock of the server that pushed it), and
// how long the index outlives the last push's report. The index only says
// which report keys to read, and Redis's own expiry of those keys decides
// which reports are live, so the grace costs at most a few reads of
// missing keys; in exchange, a server whose clock runs ahead of the
// others' by less than the grace never prunes a live report's entry.
const redisIndexGrace = time.Minute

// RedisConfig configures a RedisStore. The zero value names the keys
// "sluice:tenant:{default}:…".
type RedisConfig struct {
	// Prefix starts every key name: DefaultRedisPrefix when empty. It must
	// not contain '{' or '}', which would move the Redis Cluster hash tag
	// off the fleet's name.
	Prefix string

	// Fleet names the fleet: the servers and controller that share
	// reports, a drop table and a lease. DefaultRedisFleet when empty.
	// Stores with different fleets (or prefixes) on one Redis do not see
	// each other. Every key is Prefix + "{" + Fleet + "}:" + a suffix, so
	// that all of a fleet's keys are in one Redis Cluster slot (the braces
	// are the hash tag), and its multi-key commands and transactions work
	// in a Cluster; the name must therefore not contain '{' or '}'.
	Fleet string
}

// RedisStore is a Store in Redis, through a go-redis UniversalClient, so a
// standalone Redis, Sentinel and Cluster all work. It is safe for
// concurrent use and starts no goroutine; it does not own the client
// (closing the client is the caller's).
//
// Keys, with P = Prefix + "{" + Fleet + "}:" (all in one Cluster slot):
//
//   - P+"report:"+server: the server's latest Report as JSON, with the
//     ttl given to Push as its expiry (PX).
//   - P+"reports": the index, a sorted set of the servers that pushed,
//     each scored by its report's expiry in Unix milliseconds (by the
//     pusher's clock). Every Push prunes the servers whose report expired
//     more than a minute ago, and sets the index to expire a minute after
//     its report: a fleet that stops pushing leaves nothing behind. (So
//     the servers of one fleet should push with ttls within a minute of
//     each other, or a report could outlive the index that names it.)
//   - P+"table": the drop Table as JSON, without expiry.
//   - P+"leader": the controller's lease, the id of its holder, with the
//     lease's ttl as its expiry.
//
// Values are JSON, to be read in redis-cli; they decode leniently (fields
// that a newer version adds are ignored), so that servers of two versions
// can share a fleet during a rolling upgrade.
//
// Round trips to Redis: one for Push (a MULTI/EXEC transaction), Table,
// SetTable and Lead (a Lua script run with EVAL); two for Reports (the
// index, then an MGET of the reports), one when the index is empty. The
// client's own retries come on top (a MaxRetries of -1 turns them off);
// every command is idempotent, so a retry does no harm.
//
// Every call ends when its context does: NewRedisStore refuses a go-redis
// client without ContextTimeoutEnabled. With Redis down, a call through
// go-redis's defaults (3 retries, 5 dials each, 100 ms apart) fails only
// when its context ends; through a client with MaxRetries -1 and
// DialerRetries 1 it fails at once (connection refused), which suits a
// caller that fails open.
type RedisStore struct {
	client redis.UniversalClient
	prefix string // Prefix + "{" + Fleet + "}:"
	index  string // the index of reports
	table  string // the drop table
	leader string // the lease
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a Store in Redis through client, under the keys
// that opts names. It returns an error for a nil client, a prefix or fleet
// name with a brace, or a go-redis client (Client, ClusterClient, Ring)
// without ContextTimeoutEnabled, whose calls could outlast their context
// by the client's own read timeout (3 s by default). It sends nothing to
// Redis.
func NewRedisStore(client redis.UniversalClient, opts RedisConfig) (*RedisStore, error) {
	if client == nil {
		return nil, errors.New("tenant: NewRedisStore needs a Redis client: pass a redis.UniversalClient (redis.NewUniversalClient)")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultRedisPrefix
	}
	if opts.Fleet == "" {
		opts.Fleet = DefaultRedisFleet
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("tenant: RedisConfig.Prefix %q contains a brace: remove '{' and '}' from it (the store puts the fleet's name in braces, as the Redis Cluster hash tag)", opts.Prefix)
	}
	if strings.ContainsAny(opts.Fleet, "{}") {
		return nil, fmt.Errorf("tenant: RedisConfig.Fleet %q contains a brace: name the fleet without '{' or '}' (the store puts the name in braces itself, as the Redis Cluster hash tag)", opts.Fleet)
	}
	if !redisopt.ContextTimeoutEnabled(client) {
		return nil, errors.New("tenant: the Redis client has ContextTimeoutEnabled off, so a call could outlast its context by the client's read timeout: set ContextTimeoutEnabled: true in its options")
	}
	p := opts.Prefix + "{" + opts.Fleet + "}:"
	return &RedisStore{
		client: client,
		prefix: p,
		index:  p + "reports",
		table:  p + "table",
		leader: p + "leader",
	}, nil
}

// reportKey is the key of server's report.
func (s *RedisStore) reportKey(server string) string {
	return s.prefix + "report:" + server
}

// redisMillis is d in whole milliseconds, rounded up: Redis's expiries are
// in milliseconds, and a positive d must not round to 0 (which Redis
// refuses).
func redisMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Push implements Store, in one round trip: a transaction (MULTI/EXEC, so
// that the report and its index entry appear together) that sets the
// report with its expiry (SET … PX ttl), scores the server in the index by
// that expiry (ZADD), prunes the servers whose report expired more than a
// minute ago (ZREMRANGEBYSCORE) and gives the index an expiry a minute
// past the report's (PEXPIRE). ttl must be positive.
func (s *RedisStore) Push(ctx context.Context, r Report, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tenant: pushing %q's report to Redis: %w", r.Server, err)
	}
	if ttl <= 0 {
		return fmt.Errorf("tenant: pushing %q's report to Redis with ttl %v: give it a positive ttl (a few periods)", r.Server, ttl)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("tenant: encoding %q's report: %w", r.Server, err)
	}
	ms := redisMillis(ttl)
	now := time.Now().UnixMilli()
	grace := redisIndexGrace.Milliseconds()
	pipe := s.client.TxPipeline()
	pipe.Set(ctx, s.reportKey(r.Server), data, time.Duration(ms)*time.Millisecond)
	pipe.ZAdd(ctx, s.index, redis.Z{Score: float64(now + ms), Member: r.Server})
	pipe.ZRemRangeByScore(ctx, s.index, "-inf", "("+strconv.FormatInt(now-grace, 10))
	pipe.PExpire(ctx, s.index, time.Duration(ms+grace)*time.Millisecond)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("tenant: pushing %q's report to Redis: %w", r.Server, err)
	}
	return nil
}

// Reports implements Store, in two round trips: the servers in the index
// (ZRANGE), then their reports (MGET); one when the index is empty. A
// report that expired between the two, or that the index still names
// after its expiry, is left out. A report that does not decode is an
// error that names its key.
func (s *RedisStore) Reports(ctx context.Context) ([]Report, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tenant: reading the reports from Redis: %w", err)
	}
	servers, err := s.client.ZRange(ctx, s.index, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("tenant: reading the index of reports from Redis (%s): %w", s.index, err)
	}
	out := make([]Report, 0, len(servers))
	if len(servers) == 0 {
		return out, nil
	}
	keys := make([]string, len(servers))
	for i, server := range servers {
		keys[i] = s.reportKey(server)
	}
	values, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("tenant: reading %d reports from Redis: %w", len(keys), err)
	}
	if len(values) != len(keys) {
		return nil, fmt.Errorf("tenant: Redis answered %d values to an MGET of %d reports", len(values), len(keys))
	}
	for i, v := range values {
		if v == nil {
			continue // expired
		}
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("tenant: Redis key %s holds a %T, not a report", keys[i], v)
		}
		var r Report
		if err := json.Unmarshal([]byte(str), &r); err != nil {
			return nil, fmt.Errorf("tenant: Redis key %s does not hold a report: %w", keys[i], err)
		}
		out = append(out, r)
	}
	return out, nil
}

// SetTable implements Store, in one round trip (SET, without expiry).
func (s *RedisStore) SetTable(ctx context.Context, t Table) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tenant: writing the drop table to Redis: %w", err)
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("tenant: encoding the drop table (version %d): %w", t.Version, err)
	}
	if err := s.client.Set(ctx, s.table, data, 0).Err(); err != nil {
		return fmt.Errorf("tenant: writing the drop table to Redis (%s): %w", s.table, err)
	}
	return nil
}

// Table implements Store, in one round trip (GET). A table that does not
// decode is an error that names its key.
func (s *RedisStore) Table(ctx context.Context) (Table, error) {
	if err := ctx.Err(); err != nil {
		return Table{}, fmt.Errorf("tenant: reading the drop table from Redis: %w", err)
	}
	data, err := s.client.Get(ctx, s.table).Bytes()
	if errors.Is(err, redis.Nil) {
		return Table{}, nil
	}
	if err != nil {
		return Table{}, fmt.Errorf("tenant: reading the drop table from Redis (%s): %w", s.table, err)
	}
	var t Table
	if err := json.Unmarshal(data, &t); err != nil {
		return Table{}, fmt.Errorf("tenant: Redis key %s does not hold a drop table: %w", s.table, err)
	}
	return t, nil
}

// redisLead takes or renews the lease in one atomic step. Taking is SET NX
// PX; renewing must check that the caller still holds the lease and extend
// it in one step, or a holder whose lease expired between the check and
// the PEXPIRE would extend its successor's lease and wrongly believe it
// leads. A SET … XX GET cannot do that check (it overwrites whoever holds
// the lease), and a transaction with WATCH takes two round trips, hence a
// script. It returns 1 when ARGV[1] holds the lease (taken or renewed for
// ARGV[2] ms) and 0 when another does.
var redisLead = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
return 0
`)

// Lead implements Store, in one round trip: a Lua script (run with EVAL,
// not EVALSHA, so that a restarted Redis without the script in its cache
// costs no second round trip) that takes the lease when it is free (SET NX
// PX) and renews it when id holds it (GET, then PEXPIRE), atomically. id
// must not be empty, and ttl must be positive.
func (s *RedisStore) Lead(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("tenant: taking the lease in Redis for %q: %w", id, err)
	}
	if id == "" {
		return false, errors.New("tenant: taking the lease in Redis with an empty id: give each controller a unique, non-empty id")
	}
	if ttl <= 0 {
		return false, fmt.Errorf("tenant: taking the lease in Redis for %q with ttl %v: give it a positive ttl (a few periods)", id, ttl)
	}
	held, err := redisLead.Eval(ctx, s.client, []string{s.leader}, id, redisMillis(ttl)).Int64()
	if err != nil {
		return false, fmt.Errorf("tenant: taking the lease in Redis for %q (%s): %w", id, s.leader, err)
	}
	return held == 1, nil
}
