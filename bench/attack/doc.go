// Package attack is sluice's attack suite: the denial-of-service inputs a
// server on the open internet meets (malformed, slow, huge and endless),
// each run against a sluice server and a net/http server serving the same
// handler, beside a legitimate probe load, so that a regression shows as
// probes that net/http serves and sluice does not.
//
// An Attack is a value: a name, what it sends, and a Run function that
// sends it to a target until its context ends. All lists them. Run runs
// each attack against each target: it starts the target (Options.Start;
// by default in this process, see Serve), sends the attack and the probes
// (new connections asking GET /, or the attack's own ProbePath, at
// Options.ProbeRate) together for Options.Duration, and returns a Result
// per attack and target: what the probes got (success, p99), the server's
// CPU and peak memory when it runs in a process of its own, and what the
// attack itself found wrong (a body limit passed, say). Verdicts compares
// sluice with net/http per attack.
//
// The suite runs in two forms: `sluice attack`, with each target in a
// child process, for the figures in docs/benchmarks.md ("Attacks"), and a
// short form in this package's tests, in process, which fails when
// sluice's probes do clearly worse than net/http's under any attack.
//
// Every connection goes to the loopback address the target listens on,
// every attack is bounded by its context, and every socket it opened is
// closed when Run returns.
package attack
