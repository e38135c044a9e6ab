package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-go/sluice/client"
	"github.com/sluice-go/sluice/ratelimit"
	"github.com/sluice-go/sluice/tenant"
)

// Tenants is the source of a tenant tracker (package tenant), labelled
// server="name" (the server whose pipeline it is in) and tenant:
// sluice_tenant_requests_total, _admitted_total, _rejected_total,
// _dropped_total, _blame_seconds_total, _busy_seconds_total (each
// tenant's counts, updated once a control period, when the agent collects
// them), _drop_ratio (the drop table in force), and _enforcing, _tracked,
// _table_version. Tenants beyond the tracker's Config.Tenants are pooled
// under "~other", which bounds the series.
func Tenants(name string, t *tenant.Tracker) Source {
	return Source{kind: "tenants", name: name, open: func(*Collector) live { return &tenantsLive{name: name, t: t} }}
}

type tenantsLive struct {
	name string
	t    *tenant.Tracker
}

func (l *tenantsLive) close() {}

func (l *tenantsLive) collect(d *descs, ch chan<- prometheus.Metric) {
	st := l.t.Stats()
	name := l.name
	for _, u := range st.Totals {
		counter(ch, d.tenantRequests, float64(u.Requests), name, u.Tenant)
		counter(ch, d.tenantAdmitted, float64(u.Admitted), name, u.Tenant)
		counter(ch, d.tenantRejected, float64(u.Rejected), name, u.Tenant)
		counter(ch, d.tenantDropped, float64(u.Dropped), name, u.Tenant)
		counter(ch, d.tenantBlame, u.Blame.Seconds(), name, u.Tenant)
		counter(ch, d.tenantBusy, u.Busy.Seconds(), name, u.Tenant)
	}
	for tn, f := range st.Drops {
		gauge(ch, d.tenantDrop, f, name, tn)
	}
	gauge(ch, d.tenantEnforcing, boolValue(st.Enforcing), name)
	gauge(ch, d.tenantTracked, float64(st.Tracked), name)
	gauge(ch, d.tenantVersion, float64(st.Version), name)
}

// TenantAgent is the source of a tenant agent, labelled server="name":
// sluice_tenant_agent_ticks_total, _failures_total{step} (push, read,
// lead), _leader, _stale.
func TenantAgent(name string, a *tenant.Agent) Source {
	return Source{kind: "tenant-agent", name: name, open: func(*Collector) live { return &agentLive{name: name, a: a} }}
}

type agentLive struct {
	name string
	a    *tenant.Agent
}

func (l *agentLive) close() {}

func (l *agentLive) collect(d *descs, ch chan<- prometheus.Metric) {
	st := l.a.Stats()
	name := l.name
	counter(ch, d.agentTicks, float64(st.Ticks), name)
	counter(ch, d.agentFailures, float64(st.PushFailures), name, "push")
	counter(ch, d.agentFailures, float64(st.ReadFailures), name, "read")
	counter(ch, d.agentFailures, float64(st.LeadFailures), name, "lead")
	gauge(ch, d.agentLeader, boolValue(st.Leader), name)
	gauge(ch, d.agentStale, boolValue(st.Stale), name)
}

// RateLimiter is the source of a rate limiter (package ratelimit),
// labelled limiter="name": sluice_ratelimit_keys,
// _decisions_total{result} (allowed, refused), _overflowed_total,
// _expired_keys_total.
func RateLimiter(name string, l *ratelimit.Limiter) Source {
	return Source{kind: "ratelimit", name: name, open: func(*Collector) live { return &limiterLive{name: name, l: l} }}
}

type limiterLive struct {
	name string
	l    *ratelimit.Limiter
}

func (l *limiterLive) close() {}

func (l *limiterLive) collect(d *descs, ch chan<- prometheus.Metric) {
	st := l.l.Stats()
	gauge(ch, d.rlKeys, float64(st.Keys), l.name)
	counter(ch, d.rlDecisions, float64(st.Allowed), l.name, "allowed")
	counter(ch, d.rlDecisions, float64(st.Refused), l.name, "refused")
	counter(ch, d.rlOverflowed, float64(st.Overflowed), l.name)
	counter(ch, d.rlExpired, float64(st.Expired), l.name)
}

// RedisSync is the source of a rate limiter's sharing over Redis,
// labelled limiter="name" (give the limiter's name):
// sluice_ratelimit_redis_flushes_total, _failures_total,
// _consecutive_failures, _keys_synced_total, _commands_total,
// _deferred_total, _tracked_keys, _last_sync_timestamp_seconds.
func RedisSync(name string, s *ratelimit.RedisSync) Source {
	return Source{kind: "ratelimit-redis", name: name, open: func(*Collector) live { return &redisLive{name: name, s: s} }}
}

type redisLive struct {
	name string
	s    *ratelimit.RedisSync
}

func (l *redisLive) close() {}

func (l *redisLive) collect(d *descs, ch chan<- prometheus.Metric) {
	st := l.s.Stats()
	name := l.name
	counter(ch, d.rsFlushes, float64(st.Flushes), name)
	counter(ch, d.rsFailures, float64(st.Failures), name)
	gauge(ch, d.rsConsecutive, float64(st.ConsecutiveFailures), name)
	counter(ch, d.rsSynced, float64(st.KeysSynced), name)
	counter(ch, d.rsCommands, float64(st.CommandsSent), name)
	counter(ch, d.rsDeferred, float64(st.Deferred), name)
	gauge(ch, d.rsTracked, float64(st.TrackedKeys), name)
	last := 0.0
	if !st.LastSyncAt.IsZero() {
		last = float64(st.LastSyncAt.UnixNano()) / 1e9
	}
	gauge(ch, d.rsLastSync, last, name)
}

// Transport is the source of a client transport (package client),
// labelled client="name": sluice_client_requests_total, _attempts_total,
// _retries_total, _retry_budget_denied_total, _no_backend_total,
// _resolve_errors_total, and for each backend (backend="its URL"):
// sluice_client_backend_in_flight, _attempts_total, _rejected_total,
// _failed_total, _latency_seconds, _load, and its breaker's
// sluice_client_breaker_state{state}, _opened_total, _rejected_total.
func Transport(name string, t *client.Transport) Source {
	return Source{kind: "client", name: name, open: func(*Collector) live { return &transportLive{name: name, t: t} }}
}

type transportLive struct {
	name string
	t    *client.Transport
}

func (l *transportLive) close() {}

func (l *transportLive) collect(d *descs, ch chan<- prometheus.Metric) {
	st := l.t.Stats()
	name := l.name
	counter(ch, d.clRequests, float64(st.Requests), name)
	counter(ch, d.clAttempts, float64(st.Attempts), name)
	counter(ch, d.clRetries, float64(st.Retries), name)
	counter(ch, d.clDenied, float64(st.BudgetDenied), name)
	counter(ch, d.clNoBack, float64(st.NoBackend), name)
	counter(ch, d.clResolve, float64(st.ResolveErrors), name)
	for _, b := range st.Backends {
		gauge(ch, d.clInFlight, float64(b.InFlight), name, b.URL)
		counter(ch, d.clSent, float64(b.Sent), name, b.URL)
		counter(ch, d.clRejected, float64(b.Rejected), name, b.URL)
		counter(ch, d.clFailed, float64(b.Failed), name, b.URL)
		gauge(ch, d.clLatency, b.Latency.Seconds(), name, b.URL)
		gauge(ch, d.clLoad, b.Load, name, b.URL)
		for _, s := range [...]client.State{client.Closed, client.Open, client.HalfOpen} {
			gauge(ch, d.clBreaker, boolValue(b.Breaker.State == s), name, b.URL, s.String())
		}
		counter(ch, d.clOpened, float64(b.Breaker.Opened), name, b.URL)
		counter(ch, d.clBreakerRefuse, float64(b.Breaker.Rejected), name, b.URL)
	}
}
