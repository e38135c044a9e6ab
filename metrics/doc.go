// Package metrics exports sluice's counters to Prometheus: a
// prometheus.Collector over the Stats that the server, the admission
// pipeline, the executor, the tenant tracker, the rate limiter and the
// client transport keep anyway. The core packages do not depend on
// Prometheus; this one does.
//
//	srv, err := sluice.Listen(":8080", mux, cfg)
//	...
//	c, err := metrics.New(metrics.Config{}, metrics.Server("api", srv))
//	...
//	prometheus.MustRegister(c)
//	admin := http.NewServeMux() // on a port of its own, not the public one
//	admin.Handle("/metrics", promhttp.Handler())
//
// What a program runs later (a tenant tracker, a rate limiter, a client
// transport) is added the same way, with Add and the function of its kind:
// Server, Admission, Executor, Tenants, TenantAgent, RateLimiter,
// RedisSync, Transport. Each function's documentation lists its metrics;
// every name starts with sluice_, durations are in seconds (_seconds),
// counters end in _total, and each source's series carry its name (the
// label server, executor, limiter or client).
//
// # Autoscaling
//
// sluice_admission_gates_closed_ratio (the fraction of the last
// Config.Window in which the server turned new work away, or had every
// request wait: at its capacity) and
// sluice_admission_queue_wait_mean_seconds (how long the requests started
// in it waited first) are gauges meant for a Kubernetes
// HorizontalPodAutoscaler (through prometheus-adapter) or a KEDA scaler:
// unlike CPU utilisation, they rise when an I/O-bound server is full, and
// stay low when its database is slow and its CPUs idle. docs/operations.md
// has the manifests and says when each is right. With PromQL at hand,
// rate(sluice_admission_gates_closed_seconds_total[1m]) is the same ratio
// over a window of your choice.
//
// # OpenTelemetry
//
// A program that exports with OpenTelemetry keeps this collector: the
// otel Prometheus bridge (go.opentelemetry.io/contrib/bridges/prometheus)
// reads any prometheus.Gatherer as an OpenTelemetry metric producer. Give
// it a registry that holds the collector, and give the producer to the
// periodic reader of your exporter (see docs/operations.md).
package metrics
