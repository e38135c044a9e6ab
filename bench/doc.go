// Package bench runs the overload benchmark: the targets of Targets, each
// in a child process of its own (StartProcess, ServeChild), measured at
// multiples of their capacity by the scenarios, into a Report of Samples
// that package bench/report renders.
//
// RunSuite plans and runs the suite. A Scenario says what points it runs
// and runs one with the kit a Trial gives it: a target's child process,
// the load generator (package bench/load) set up as the suite says, and
// the CPU bracket of both processes (CPUMeter). Package bench/scenario
// holds the scenarios, one file each. For the soak scenario, RunChaos runs
// misbehaving clients (slowloris, clients that never read, resets
// mid-request, garbage, pipelined floods) beside the load, and
// Process.Monitor reads the target's memory, goroutines and descriptors
// every second.
package bench
