// Package hello holds the side-by-side benchmarks of sluice's HTTP server
// against net/http and fasthttp; it has no API, only tests.
//
// BenchmarkHello serves a hello-world response from each server and drives
// it with the same closed-loop client: C keep-alive connections (64 by
// default, SLUICE_BENCH_CONNS to change), each sending GET requests as raw
// HTTP/1.1 bytes and parsing the response (status line, Content-Length,
// body). The client runs in a child process by default
// (SLUICE_BENCH_CLIENT=process: this test binary run again with
// SLUICE_BENCH_LOAD_CLIENT set, which warms up, runs the timed requests when
// told to on its standard input and writes its result as a JSON line), or
// in the benchmark's process with SLUICE_BENCH_CLIENT=inproc. It reports
// requests per second, the median and 99th percentile latency in
// microseconds, the CPU time per request of the server's process and of the
// client's apart (of the one process with the in-process client),
// allocations per request (the server's: the client allocates nothing per
// request) and, for sluice, the workers' parks in epoll_wait, polls and
// tasks per request. The sluice targets run on a runtime with the default
// options; SLUICE_BENCH_PIN=0 and SLUICE_BENCH_GOMAXPROCS=n change its
// pinning and GOMAXPROCS, for diagnosis.
//
// BenchmarkIdleConnMemory measures the server's Go heap and stacks per idle
// kept-alive connection: a child process (this test binary, run again with
// SLUICE_BENCH_IDLE_CLIENT set) opens the connections, 10,000 by default
// (SLUICE_BENCH_IDLE_CONNS), sends one request on each and reads the
// response, then holds them until its standard input closes. The child
// keeps the client's descriptors out of the server's process.
//
// The benchmarks live in their own package, not in server's tests (and in
// the bench module, whose go.mod alone requires fasthttp), because
// fasthttp leaves goroutines behind (its Date header refresher, which never
// ends, and its worker pool's cleaner, which ends up to 10 seconds after its
// server), which the goleak check of this package's TestMain ignores by
// name; the server package's own TestMain, shared by its internal and
// external test files, checks for every leak.
//
// scripts/bench-server runs them in alternating rounds and prints medians
// and ratios; docs/benchmarks.md has the figures.
package hello
