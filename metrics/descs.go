package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label names.
const (
	labelServer   = "server"
	labelExecutor = "executor"
	labelLimiter  = "limiter"
	labelClient   = "client"
)

// histogramBounds are the upper bounds of the buckets of the request
// duration and queue wait histograms, in seconds: 100 µs to 10 s, each
// one of the observer's own bounds (internal/obs), so that the counts are
// exact.
func histogramBounds() []time.Duration {
	var out []time.Duration
	for _, s := range []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10} {
		out = append(out, time.Duration(s*float64(time.Second)))
	}
	return out
}

// descs are a Collector's metric descriptors, made once.
type descs struct {
	all    []*prometheus.Desc
	bounds []time.Duration

	// The server and its admission.
	requests, duration, inFlight, conns   *prometheus.Desc
	parked                                *prometheus.Desc
	holds                                 *prometheus.Desc
	moves                                 *prometheus.Desc
	handshakes, handshaking               *prometheus.Desc
	admitted, rejected, queued, closed    *prometheus.Desc
	canceled                              *prometheus.Desc
	late                                  *prometheus.Desc
	queueLen, queueWait, maxAge, standing *prometheus.Desc
	closedRatio, waitMean, handlerErrors  *prometheus.Desc

	// The executor.
	workers, busy, workerBusy, workerCPUWait          *prometheus.Desc
	workerLends, workerLendsTaken                     *prometheus.Desc
	laneQueued, laneTasks, laneWait, laneRun          *prometheus.Desc
	blocked, handovers, spares, starved, droppedTasks *prometheus.Desc
	throttledPeriods, throttledTime                   *prometheus.Desc

	// Tenants.
	tenantRequests, tenantAdmitted, tenantRejected, tenantDropped *prometheus.Desc
	tenantBlame, tenantBusy, tenantDrop                           *prometheus.Desc
	tenantEnforcing, tenantTracked, tenantVersion                 *prometheus.Desc
	agentTicks, agentFailures, agentLeader, agentStale            *prometheus.Desc

	// Rate limits.
	rlKeys, rlDecisions, rlOverflowed, rlExpired   *prometheus.Desc
	rsFlushes, rsFailures, rsConsecutive, rsSynced *prometheus.Desc
	rsCommands, rsDeferred, rsTracked, rsLastSync  *prometheus.Desc

	// The client transport.
	clRequests, clAttempts, clRetries, clDenied, clNoBack   *prometheus.Desc
	clResolve, clInFlight, clSent, clRejected, clFailed     *prometheus.Desc
	clLatency, clLoad, clBreaker, clOpened, clBreakerRefuse *prometheus.Desc
}

func newDescs() *descs {
	d := &descs{bounds: histogramBounds()}
	n := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc("sluice_"+name, help, labels, nil)
		d.all = append(d.all, desc)
		return desc
	}
	s := labelServer

	d.requests = n("http_requests_total", "Requests answered, by status class: those that ran (their handler's status) and the rejections (503, 429, ...).", s, "class")
	d.duration = n("http_request_duration_seconds", "Time admitted requests ran, from their start to their end (the wait before the start is sluice_admission_queue_wait_seconds).", s)
	d.inFlight = n("http_requests_in_flight", "Admitted requests that have not ended.", s)
	d.conns = n("http_connections", "Open client connections.", s)
	d.moves = n("http_connection_moves_total", "Times a connection moved to an idle worker because its request had waited behind its own worker's work.", s)
	d.holds = n("http_holds_total", "Times a client connection was left unread after a refusal for overload until its Retry-After had passed (sluice_http_connections_parked counts those left unread now).", s)
	d.parked = n("http_connections_parked", "Open client connections left unread after a refusal for overload until its Retry-After has passed: clients beyond what the server serves within its age limit, which resend at once (server.Config.HoldRefused).", s)
	d.handshakes = n("tls_handshakes_total", "TLS handshakes of an HTTPS server, by result: completed; failed (not TLS, refused by the configuration, the client gone or out of time); waited (the client's address held its share of the worker's places: the hello waited for one); evicted (the oldest of the worker's share of Config.MaxHandshakes, closed for a newer hello); late (the hello had waited past the age limit: closed before any work).", s, "result")
	d.handshaking = n("tls_handshakes_in_progress", "TLS handshakes running now.", s)
	d.handlerErrors = n("http_handler_errors_total", "Admitted requests whose handler failed: it panicked, or its answer could not be written.", s)

	d.admitted = n("admission_admitted_total", "Requests admitted, at once or after waiting in the queue.", s)
	d.rejected = n("admission_rejected_total", "Requests rejected unstarted, by reason (the Sluice-Reject-Reason field) and status code.", s, "reason", "code")
	d.canceled = n("admission_canceled_total", "Requests whose client went away after they were decided and before they ran (an HTTP/2 stream reset, a connection closed while its request waited): not the server's refusals, and not in admission_rejected_total.", s)
	d.late = n("admission_late_total", "Requests started past the age limit, within its grace for a closed loop (admit.Config.LoopGrace): clients that each send again the moment they are answered, whose line cannot grow. In admission_admitted_total too.", s)
	d.queued = n("admission_queued_total", "Requests that had to wait in the timed queue, whatever became of them.", s)
	d.closed = n("admission_gates_closed_seconds_total", "Time the gates were closed: from a refusal (by a gate, or by the age limit) until a request was admitted with no one left waiting.", s)
	d.queueLen = n("admission_queue_length", "Requests waiting in the timed queue now.", s)
	d.queueWait = n("admission_queue_wait_seconds", "Time admitted requests waited before they started, from their arrival (the kernel's receive stamp on the sluice server) to their start: in the socket buffers and in the timed queue.", s)
	d.maxAge = n("admission_max_age_seconds", "The age limit in force: the configured limit, or the standing line's target while the line stands (unless refusing under the target was found futile: clients that resend at once); zero without a limit.", s)
	d.standing = n("admission_standing", "1 while an overload's line stands (requests reached the age limit and kept reaching it; the limit is then the target), else 0.", s)
	d.closedRatio = n("admission_gates_closed_ratio", "Fraction of the recent window (Config.Window, 30 s by default) in which the gates were closed: the autoscaling signal, 0 with room to spare, near 1 when the server turns work away, or has every request wait, all the time.", s)
	d.waitMean = n("admission_queue_wait_mean_seconds", "Mean time the requests admitted in the recent window (Config.Window, 30 s by default) waited before they started: the autoscaling signal for servers whose requests wait in a queue.", s)

	e := labelExecutor
	d.workers = n("executor_workers", "Workers of the executor: one per CPU it runs on.", e)
	d.busy = n("executor_busy_workers", "Workers busy now (not parked in epoll_wait).", e)
	d.workerBusy = n("executor_worker_busy_seconds_total", "Time each worker was busy.", e, "worker")
	d.workerLends = n("executor_worker_lends_total", "Times each worker's CPU was lent, idle, to a handler run on its own goroutine (an HTTP/2 stream of a quick route).", e, "worker")
	d.workerLendsTaken = n("executor_worker_lends_taken_total", "Leases of each worker's CPU that the watchdog took back: the handler held it past the rescue's limit.", e, "worker")
	d.workerCPUWait = n("executor_worker_cpu_wait_seconds_total", "Time each worker's thread was ready to run but waited for a CPU, as the kernel counts it: another process or thread held its CPU.", e, "worker")
	d.laneQueued = n("executor_lane_queued_tasks", "Tasks waiting in each lane's run queues now.", e, "lane")
	d.laneTasks = n("executor_lane_tasks_total", "Tasks each lane ran.", e, "lane")
	d.laneWait = n("executor_lane_wait_seconds_total", "Time tasks waited in each lane's run queues before they ran.", e, "lane")
	d.laneRun = n("executor_lane_run_seconds_total", "Time tasks of each lane ran.", e, "lane")
	d.blocked = n("executor_blocked_total", "Handlers found holding their worker's thread off the CPU (blocked without Await) for longer than the rescue's limit.", e)
	d.handovers = n("executor_handovers_total", "Times a worker went on without its blocked thread, on a spare one.", e)
	d.spares = n("executor_spare_threads", "Spare threads alive now, beyond one per worker.", e)
	d.starved = n("executor_starved_total", "Readings (about one a second per worker) in which a worker's thread waited for its CPU more than a quarter of the time.", e)
	d.droppedTasks = n("executor_dropped_tasks_total", "Tasks discarded when the executor stopped.", e)
	d.throttledPeriods = n("executor_throttled_periods_total", "Periods of the CPU quota (a container's CPU limit) in which the process's cgroup was throttled; 0 without a quota.", e)
	d.throttledTime = n("executor_throttled_seconds_total", "Time the CPU quota (a container's CPU limit) held the tasks of the process's cgroup off the CPU; 0 without a quota. The watchdog counts no throttled thread as blocked.", e)

	d.tenantRequests = n("tenant_requests_total", "Requests of each tenant that reached the tenant policy (admitted + rejected + dropped), counted at each control period.", s, "tenant")
	d.tenantAdmitted = n("tenant_admitted_total", "Requests of each tenant that started and ended.", s, "tenant")
	d.tenantRejected = n("tenant_rejected_total", "Requests of each tenant that the tenant policy let through and a later stage (a gate, the queue, the age limit) refused.", s, "tenant")
	d.tenantDropped = n("tenant_dropped_total", "Requests of each tenant dropped for its share (429, reason tenant-share).", s, "tenant")
	d.tenantBlame = n("tenant_blame_seconds_total", "Each tenant's share of the time the gates were closed, summed over its requests.", s, "tenant")
	d.tenantBusy = n("tenant_busy_seconds_total", "Time each tenant's admitted requests ran, summed.", s, "tenant")
	d.tenantDrop = n("tenant_drop_ratio", "Fraction of each tenant's requests the drop table says to drop now.", s, "tenant")
	d.tenantEnforcing = n("tenant_enforcing", "1 while the tenant policy enforces the drop table, 0 while it only counts.", s)
	d.tenantTracked = n("tenant_tracked", "Tenants followed by name (the rest are pooled under ~other).", s)
	d.tenantVersion = n("tenant_table_version", "Version of the drop table applied (0: none, or cleared).", s)
	d.agentTicks = n("tenant_agent_ticks_total", "Control periods the tenant agent ran.", s)
	d.agentFailures = n("tenant_agent_failures_total", "Failed round trips of the tenant agent to its store, by step (push, read, lead).", s, "step")
	d.agentLeader = n("tenant_agent_leader", "1 if this agent led the fleet's controller in the last period, else 0.", s)
	d.agentStale = n("tenant_agent_stale", "1 while the drops are cleared because the store could not be read, or the table stopped changing (fail open), else 0.", s)

	l := labelLimiter
	d.rlKeys = n("ratelimit_keys", "Keys the rate limiter counts now.", l)
	d.rlDecisions = n("ratelimit_decisions_total", "Rate limit decisions, by result (allowed, refused).", l, "result")
	d.rlOverflowed = n("ratelimit_overflowed_total", "Decisions made in an overflow bucket because the key table was full of keys in use.", l)
	d.rlExpired = n("ratelimit_expired_keys_total", "Idle keys removed.", l)
	d.rsFlushes = n("ratelimit_redis_flushes_total", "Round trips to Redis that shared the counts.", l)
	d.rsFailures = n("ratelimit_redis_failures_total", "Round trips to Redis that failed in part or whole (the counts went with the next one).", l)
	d.rsConsecutive = n("ratelimit_redis_consecutive_failures", "Failed round trips to Redis since the last one that succeeded.", l)
	d.rsSynced = n("ratelimit_redis_keys_synced_total", "Times a key's global counts were read back from Redis.", l)
	d.rsCommands = n("ratelimit_redis_commands_total", "Redis commands sent.", l)
	d.rsDeferred = n("ratelimit_redis_deferred_total", "Times a key was left for a later round trip, the batch being full.", l)
	d.rsTracked = n("ratelimit_redis_tracked_keys", "Keys the last round trip sent, read or left for later.", l)
	d.rsLastSync = n("ratelimit_redis_last_sync_timestamp_seconds", "When the last successful round trip to Redis ended, in Unix seconds (0: none yet).", l)

	c := labelClient
	d.clRequests = n("client_requests_total", "Requests the client transport was given.", c)
	d.clAttempts = n("client_attempts_total", "Attempts sent: first ones and retries.", c)
	d.clRetries = n("client_retries_total", "Retries sent.", c)
	d.clDenied = n("client_retry_budget_denied_total", "Retries the retry budget refused.", c)
	d.clNoBack = n("client_no_backend_total", "Requests failed fast because no backend could take them.", c)
	d.clResolve = n("client_resolve_errors_total", "Failed resolutions of the backends.", c)
	d.clInFlight = n("client_backend_in_flight", "Attempts waiting for each backend's answer now.", c, "backend")
	d.clSent = n("client_backend_attempts_total", "Attempts sent to each backend.", c, "backend")
	d.clRejected = n("client_backend_rejected_total", "Attempts each backend refused unstarted (Sluice-Not-Started).", c, "backend")
	d.clFailed = n("client_backend_failed_total", "Attempts to each backend that failed (errors, server errors).", c, "backend")
	d.clLatency = n("client_backend_latency_seconds", "Each backend's latency average (peak EWMA) that the balancer uses.", c, "backend")
	d.clLoad = n("client_backend_load", "Each backend's last load hint (Sluice-Load): requests it holds per worker.", c, "backend")
	d.clBreaker = n("client_breaker_state", "Each backend's circuit breaker state: 1 for the state it is in (closed, open, half-open), 0 for the others.", c, "backend", "state")
	d.clOpened = n("client_breaker_opened_total", "Times each backend's breaker opened.", c, "backend")
	d.clBreakerRefuse = n("client_breaker_rejected_total", "Requests each backend's open breaker refused (failed fast).", c, "backend")
	return d
}
