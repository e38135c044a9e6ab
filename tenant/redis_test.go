package tenant

import (
	"context"
	"encoding/json"
	"log"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/redistest"
)

// redisStoreTTL is the short ttl of the conformance suite on a real Redis:
// long enough that the few calls the suite makes within one ttl take a
// small part of it even on a loaded machine, short enough that the suite
// waits a few seconds in all.
const redisStoreTTL = 500 * time.Millisecond

// redisStoreClient returns a client of addr as an agent would configure it
// (each call bounded by its context, no retries: the next period is the
// retry), closed when the test ends.
func redisStoreClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// newTestRedisStore returns a RedisStore through client for opts, failing
// the test on error.
func newTestRedisStore(t testing.TB, client redis.UniversalClient, opts RedisConfig) *RedisStore {
	t.Helper()
	s, err := NewRedisStore(client, opts)
	require.NoError(t, err)
	return s
}

// redisStoreMaker makes stores through client, each in a fleet of its own
// (the test's name), so that the suite's tests share one redis-server.
func redisStoreMaker(client redis.UniversalClient) storeMaker {
	return func(t *testing.T) storeUnderTest {
		return storeUnderTest{
			store: newTestRedisStore(t, client, RedisConfig{Fleet: t.Name()}),
			ttl:   redisStoreTTL,
			wait:  time.Sleep,
		}
	}
}

func TestRedisStoreConformance(t *testing.T) {
	addr := redistest.Start(t)
	testStoreConformance(t, redisStoreMaker(redisStoreClient(t, addr)))
}

// The suite passes through a ClusterClient on a one-node Redis Cluster,
// which refuses a transaction or an MGET whose keys are in more than one
// slot (CROSSSLOT), as a cluster of many nodes does: the fleet's hash tag
// keeps them in one.
func TestRedisStoreClusterConformance(t *testing.T) {
	addr := startRedisClusterNode(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	testStoreConformance(t, redisStoreMaker(client))

	// Every key of a fleet is in the slot of its name.
	ctx := context.Background()
	s := newTestRedisStore(t, client, RedisConfig{Fleet: "f"})
	want, err := client.ClusterKeySlot(ctx, "f").Result()
	require.NoError(t, err)
	for _, key := range []string{s.reportKey("a"), s.index, s.table, s.leader} {
		slot, err := client.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, want, slot, key)
	}
}

// The suite passes through a client made by redis.NewUniversalClient, as
// an agent makes one from its flags.
func TestRedisStoreUniversalClient(t *testing.T) {
	addr := redistest.Start(t)
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	s := newTestRedisStore(t, client, RedisConfig{})
	ctx := context.Background()
	require.NoError(t, s.Push(ctx, testReport("a", 1), time.Minute))
	reports, err := s.Reports(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Report{testReport("a", 1)}, reports)
}

func TestNewRedisStoreRefuses(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { good.Close() })
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { plain.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { cluster.Close() })
	for _, tc := range []struct {
		client redis.UniversalClient
		opts   RedisConfig
		want   string
	}{
		{nil, RedisConfig{}, "needs a Redis client"},
		{good, RedisConfig{Fleet: "a{b}"}, `RedisConfig.Fleet "a{b}" contains a brace: name the fleet without '{' or '}'`},
		{good, RedisConfig{Fleet: "}"}, `RedisConfig.Fleet "}" contains a brace`},
		{good, RedisConfig{Prefix: "app:{x}:"}, `RedisConfig.Prefix "app:{x}:" contains a brace: remove '{' and '}'`},
		{plain, RedisConfig{}, "ContextTimeoutEnabled off"},
		{cluster, RedisConfig{}, "set ContextTimeoutEnabled: true"},
	} {
		s, err := NewRedisStore(tc.client, tc.opts)
		if assert.Error(t, err, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
		}
		assert.Nil(t, s)
	}
}

// Bad arguments are errors that name them, before anything is sent.
func TestRedisStoreRefusesArguments(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	s := newTestRedisStore(t, client, RedisConfig{})
	ctx := context.Background()
	err := s.Push(ctx, testReport("a", 1), 0)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), `"a"'s report to Redis with ttl 0s: give it a positive ttl`)
	}
	_, err = s.Lead(ctx, "a", -time.Second)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), `for "a" with ttl -1s: give it a positive ttl`)
	}
	_, err = s.Lead(ctx, "", time.Second)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "empty id")
	}
	err = s.SetTable(ctx, Table{Version: 4, Drops: map[string]float64{"a": math.NaN()}})
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "encoding the drop table (version 4)")
	}
}

// The keys are named as documented, hold JSON, and expire as documented.
func TestRedisStoreKeys(t *testing.T) {
	addr := redistest.Start(t)
	check := redisStoreClient(t, addr)
	ctx := context.Background()
	s := newTestRedisStore(t, redisStoreClient(t, addr), RedisConfig{})
	before := time.Now()
	require.NoError(t, s.Push(ctx, testReport("s1", 1), 10*time.Second))
	require.NoError(t, s.SetTable(ctx, Table{Version: 3, Drops: map[string]float64{"bob": 0.5}}))
	ok, err := s.Lead(ctx, "c1", 10*time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	keys, err := check.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"sluice:tenant:{default}:report:s1",
		"sluice:tenant:{default}:reports",
		"sluice:tenant:{default}:table",
		"sluice:tenant:{default}:leader",
	}, keys)

	raw, err := check.Get(ctx, "sluice:tenant:{default}:report:s1").Result()
	require.NoError(t, err)
	var r Report
	require.NoError(t, json.Unmarshal([]byte(raw), &r), raw)
	assert.Equal(t, testReport("s1", 1), r)
	assert.Contains(t, raw, `"server":"s1"`, "readable")
	ttl, err := check.PTTL(ctx, "sluice:tenant:{default}:report:s1").Result()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= 10*time.Second, "report's ttl %v", ttl)

	score, err := check.ZScore(ctx, "sluice:tenant:{default}:reports", "s1").Result()
	require.NoError(t, err)
	expiry := time.UnixMilli(int64(score))
	assert.WithinRange(t, expiry, before.Add(10*time.Second-time.Millisecond), time.Now().Add(10*time.Second+time.Millisecond), "indexed by its expiry")
	ttl, err = check.PTTL(ctx, "sluice:tenant:{default}:reports").Result()
	require.NoError(t, err)
	assert.True(t, ttl > 10*time.Second && ttl <= 10*time.Second+redisIndexGrace, "index's ttl %v", ttl)

	raw, err = check.Get(ctx, "sluice:tenant:{default}:table").Result()
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":3,"drops":{"bob":0.5}}`, raw)
	ttl, err = check.PTTL(ctx, "sluice:tenant:{default}:table").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "the table does not expire")

	holder, err := check.Get(ctx, "sluice:tenant:{default}:leader").Result()
	require.NoError(t, err)
	assert.Equal(t, "c1", holder)
	ttl, err = check.PTTL(ctx, "sluice:tenant:{default}:leader").Result()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= 10*time.Second, "lease's ttl %v", ttl)

	// A ttl under a millisecond is one, not zero (which Redis refuses).
	require.NoError(t, s.Push(ctx, testReport("s2", 1), time.Microsecond))
	ok, err = s.Lead(ctx, "c2", time.Microsecond)
	require.NoError(t, err)
	assert.False(t, ok, "c1 holds the lease")
}

// Stores of other prefixes or fleets use other keys and do not see each
// other's reports, table or lease.
func TestRedisStoreFleets(t *testing.T) {
	addr := redistest.Start(t)
	client, check := redisStoreClient(t, addr), redisStoreClient(t, addr)
	ctx := context.Background()
	a := newTestRedisStore(t, client, RedisConfig{})
	b := newTestRedisStore(t, client, RedisConfig{Fleet: "blue"})
	c := newTestRedisStore(t, client, RedisConfig{Prefix: "app:", Fleet: "blue"})
	for i, s := range []*RedisStore{a, b, c} {
		require.NoError(t, s.Push(ctx, testReport("s", uint64(i+1)), time.Minute))
		require.NoError(t, s.SetTable(ctx, Table{Version: uint64(i + 1)}))
		ok, err := s.Lead(ctx, "c"+strconv.Itoa(i), time.Minute)
		require.NoError(t, err)
		assert.True(t, ok, "each fleet its own lease")
	}
	for i, s := range []*RedisStore{a, b, c} {
		reports, err := s.Reports(ctx)
		require.NoError(t, err)
		assert.Equal(t, []Report{testReport("s", uint64(i+1))}, reports)
		table, err := s.Table(ctx)
		require.NoError(t, err)
		assert.Equal(t, Table{Version: uint64(i + 1)}, table)
	}
	n, err := check.Exists(ctx, "sluice:tenant:{blue}:table", "app:{blue}:table", "sluice:tenant:{default}:table").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
}

// A report aged out by its ttl is gone from Redis, not only from Reports;
// the index forgets a server a minute after its report expired, and a
// server in the index without a report is left out of Reports.
func TestRedisStoreIndex(t *testing.T) {
	addr := redistest.Start(t)
	check := redisStoreClient(t, addr)
	ctx := context.Background()
	s := newTestRedisStore(t, redisStoreClient(t, addr), RedisConfig{})
	require.NoError(t, s.Push(ctx, testReport("short", 1), 100*time.Millisecond))
	require.Eventually(t, func() bool {
		return check.Exists(ctx, s.reportKey("short")).Val() == 0
	}, 5*time.Second, 10*time.Millisecond, "the report expires in Redis")
	reports, err := s.Reports(ctx)
	require.NoError(t, err)
	assert.Empty(t, reports)

	now := time.Now()
	require.NoError(t, check.ZAdd(ctx, s.index,
		redis.Z{Score: float64(now.Add(-2 * redisIndexGrace).UnixMilli()), Member: "long-gone"},
		redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: "no-report"},
	).Err())
	require.NoError(t, s.Push(ctx, testReport("a", 1), time.Minute))
	members, err := check.ZRange(ctx, s.index, 0, -1).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"short", "no-report", "a"}, members, "long-gone pruned; short within the grace")
	reports, err = s.Reports(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Report{testReport("a", 1)}, reports)
}

// A value that does not decode is an error naming its key.
func TestRedisStoreBadValues(t *testing.T) {
	addr := redistest.Start(t)
	check := redisStoreClient(t, addr)
	ctx := context.Background()
	s := newTestRedisStore(t, redisStoreClient(t, addr), RedisConfig{})
	require.NoError(t, s.Push(ctx, testReport("a", 1), time.Minute))
	require.NoError(t, check.Set(ctx, s.reportKey("bad"), "not json", time.Minute).Err())
	require.NoError(t, check.ZAdd(ctx, s.index, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "bad"}).Err())
	_, err := s.Reports(ctx)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "Redis key sluice:tenant:{default}:report:bad does not hold a report")
	}

	require.NoError(t, check.Set(ctx, s.table, `{"version":"x"}`, 0).Err())
	_, err = s.Table(ctx)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "Redis key sluice:tenant:{default}:table does not hold a drop table")
	}
	require.NoError(t, check.Del(ctx, s.table).Err())
	require.NoError(t, check.HSet(ctx, s.table, "version", 1).Err())
	_, err = s.Table(ctx)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "sluice:tenant:{default}:table")
		assert.Contains(t, err.Error(), "WRONGTYPE")
	}

	// Fields a newer version adds are ignored.
	require.NoError(t, check.Set(ctx, s.table, `{"version":5,"drops":{"a":0.5},"since":"later"}`, 0).Err())
	table, err := s.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, Table{Version: 5, Drops: map[string]float64{"a": 0.5}}, table)
}

// redisRoundTrips counts the commands and pipelines a client sends, less
// those of a new connection's handshake (HELLO, CLIENT SETINFO).
type redisRoundTrips struct{ n atomic.Int64 }

func (h *redisRoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *redisRoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *redisRoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "client" {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// Each call takes the round trips documented on RedisStore.
func TestRedisStoreRoundTrips(t *testing.T) {
	addr := redistest.Start(t)
	client := redisStoreClient(t, addr)
	ctx := context.Background()
	require.NoError(t, client.Ping(ctx).Err())
	var trips redisRoundTrips
	client.AddHook(&trips)
	s := newTestRedisStore(t, client, RedisConfig{})
	count := func(call func() error) int64 {
		t.Helper()
		before := trips.n.Load()
		require.NoError(t, call())
		return trips.n.Load() - before
	}
	assert.Equal(t, int64(1), count(func() error { _, err := s.Reports(ctx); return err }), "Reports, none pushed")
	for i := range 20 {
		assert.Equal(t, int64(1), count(func() error { return s.Push(ctx, testReport("s"+strconv.Itoa(i), 1), time.Minute) }), "Push")
	}
	assert.Equal(t, int64(2), count(func() error { _, err := s.Reports(ctx); return err }), "Reports of 20 servers")
	assert.Equal(t, int64(1), count(func() error { _, err := s.Table(ctx); return err }), "Table, none written")
	assert.Equal(t, int64(1), count(func() error { return s.SetTable(ctx, Table{Version: 1}) }), "SetTable")
	assert.Equal(t, int64(1), count(func() error { _, err := s.Table(ctx); return err }), "Table")
	assert.Equal(t, int64(1), count(func() error { _, err := s.Lead(ctx, "a", time.Minute); return err }), "Lead, taking")
	assert.Equal(t, int64(1), count(func() error { _, err := s.Lead(ctx, "a", time.Minute); return err }), "Lead, renewing")
	assert.Equal(t, int64(1), count(func() error { _, err := s.Lead(ctx, "b", time.Minute); return err }), "Lead, refused")
}

// redisStoreCalls makes each of the store's calls with a context of
// timeout and returns their errors and the longest a call took.
func redisStoreCalls(s Store, timeout time.Duration) (errs []error, longest time.Duration) {
	call := func(f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		errs = append(errs, f(ctx))
		longest = max(longest, time.Since(start))
	}
	call(func(ctx context.Context) error { return s.Push(ctx, testReport("a", 2), time.Minute) })
	call(func(ctx context.Context) error { _, err := s.Reports(ctx); return err })
	call(func(ctx context.Context) error { return s.SetTable(ctx, Table{Version: 2}) })
	call(func(ctx context.Context) error { _, err := s.Table(ctx); return err })
	call(func(ctx context.Context) error { _, err := s.Lead(ctx, "b", time.Minute); return err })
	return errs, longest
}

// With Redis down, every call fails: at once through a client that does
// not retry, within its context through one that does. Once Redis is back
// (empty: nothing is persisted), calls work again.
func TestRedisStoreDown(t *testing.T) {
	srv := redistest.StartServer(t)
	// An agent's client: no retries, one dial a call.
	fast := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { fast.Close() })
	// go-redis's defaults: retries, which the context bounds.
	retrying := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { retrying.Close() })
	s := newTestRedisStore(t, fast, RedisConfig{})
	sr := newTestRedisStore(t, retrying, RedisConfig{})
	ctx := context.Background()
	require.NoError(t, s.Push(ctx, testReport("a", 1), time.Minute))
	ok, err := s.Lead(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = sr.Table(ctx)
	require.NoError(t, err)

	srv.Stop()
	errs, longest := redisStoreCalls(s, 5*time.Second)
	for i, err := range errs {
		assert.Error(t, err, "call %d with Redis down", i)
	}
	assert.Less(t, longest, time.Second, "calls fail at once (connection refused), well within their context")
	const timeout = 300 * time.Millisecond
	errs, longest = redisStoreCalls(sr, timeout)
	for i, err := range errs {
		assert.Error(t, err, "call %d with Redis down, retrying", i)
	}
	assert.Less(t, longest, timeout+time.Second, "calls that retry end with their context")

	srv.Restart()
	for _, s := range []*RedisStore{s, sr} {
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return s.Push(ctx, testReport("a", 3), time.Minute) == nil
		}, 10*time.Second, 50*time.Millisecond, "Push works once Redis is back")
	}
	reports, err := s.Reports(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Report{testReport("a", 3)}, reports)
	table, err := s.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, Table{}, table, "Redis came back empty")
	ok, err = s.Lead(ctx, "b", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "the lease was lost with Redis")
}

// With Redis hung (the port accepts, nothing answers), every call fails
// when its context ends; once it answers again, calls work again.
func TestRedisStoreHung(t *testing.T) {
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	s := newTestRedisStore(t, client, RedisConfig{})
	ctx := context.Background()
	require.NoError(t, s.Push(ctx, testReport("a", 1), time.Minute))

	srv.Pause()
	const timeout = 200 * time.Millisecond
	errs, longest := redisStoreCalls(s, timeout)
	srv.Resume()
	for i, err := range errs {
		assert.Error(t, err, "call %d with Redis hung", i)
	}
	assert.Less(t, longest, timeout+time.Second, "calls end with their context")

	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.Reports(ctx)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "Reports works once Redis answers")
	reports, err := s.Reports(ctx)
	require.NoError(t, err)
	assert.Len(t, reports, 1)
}

// A leader that dies (its process, here its client, gone) loses the lease
// to a candidate that keeps asking, about a ttl later.
func TestRedisStoreLeaderFailover(t *testing.T) {
	addr := redistest.Start(t)
	const ttl = 200 * time.Millisecond
	ctx := context.Background()
	holderClient := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	holder := newTestRedisStore(t, holderClient, RedisConfig{})
	candidate := newTestRedisStore(t, redisStoreClient(t, addr), RedisConfig{})
	ok, err := holder.Lead(ctx, "holder", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = candidate.Lead(ctx, "candidate", ttl)
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, holderClient.Close())
	died := time.Now()
	require.Eventually(t, func() bool {
		ok, err := candidate.Lead(ctx, "candidate", ttl)
		return err == nil && ok
	}, 10*time.Second, 20*time.Millisecond, "the candidate takes over")
	assert.GreaterOrEqual(t, time.Since(died), ttl/2, "not before the holder's lease ended")
	_, err = holder.Lead(ctx, "holder", ttl)
	assert.Error(t, err, "the holder's client is closed")
}

// startRedisClusterNode starts a redis-server in cluster mode on a free
// port of 127.0.0.1, gives it every slot (a cluster of one node) and
// returns its address once the cluster is up; the server is stopped when
// the test ends. Without redis-server on PATH it skips the test, or fails
// it under CI=true, as redistest does.
func startRedisClusterNode(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath(redistest.Program)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (%s): %v", redistest.Program, redistest.InstallCommand, err)
		}
		t.Skipf("%s is not installed; install it (%s) to run this test", redistest.Program, redistest.InstallCommand)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir()

	cmd := exec.Command(path,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf",
		"--cluster-announce-ip", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", "")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// Killed with the test process (on Linux): the kernel kills it when the
	// thread that started it ends, which the goroutine below holds until
	// the server has exited.
	cmd.SysProcAttr = redistest.SysProcAttr()
	started, exited := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(exited)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
	}()
	require.NoError(t, <-started)
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", redistest.Program, out.String())
		}
	})

	node := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer node.Close()
	ctx := context.Background()
	require.Eventually(t, func() bool { return node.Ping(ctx).Err() == nil }, 10*time.Second, 10*time.Millisecond, "%s in cluster mode answers", redistest.Program)
	require.NoError(t, node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	require.Eventually(t, func() bool {
		info, err := node.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 10*time.Second, 10*time.Millisecond, "the cluster is up")
	return addr
}

// ExampleNewRedisStore shows a store for the servers and controller of
// one fleet, through a client that a Sentinel or Cluster deployment would
// configure with more addresses (or a MasterName).
func ExampleNewRedisStore() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 []string{"127.0.0.1:6379"},
		ContextTimeoutEnabled: true, // a call ends with its context
		MaxRetries:            -1,   // the next period is the retry
		DialerRetries:         1,    // with Redis down, fail at once
	})
	defer client.Close()
	store, err := NewRedisStore(client, RedisConfig{Fleet: "checkout"}) // keys sluice:tenant:{checkout}:…
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	table, err := store.Table(ctx)
	if err != nil {
		log.Printf("tenant store: %v; keeping the last table", err) // fail open
		return
	}
	log.Printf("drop table version %d: %v", table.Version, table.Drops)
}
