// Package bench runs the overload benchmark: the targets of Targets, each
// in a child process of its own (StartProcess, ServeChild), measured at
// multiples of their capacity by the scenarios, into a Report of Samples
// that package bench/report renders.
//
// RunSuite plans and runs the suite. A Scenario says what points it runs
// and runs one with the kit a Trial gives it: a target's child process,
// the load generator (package bench/load) set up as the suite says, and
// the CPU bracket of both processes (CPUMeter). Package bench/scenario
// holds the scenarios, one file each. Process.Monitor reads a target's
// memory, goroutines and descriptors every second, for a scenario that
// runs misbehaving clients (package bench/chaos) beside the load.
//
// The child process knows no scenario: it serves the weather service on
// the target its ChildSpec names, and a scenario that needs more there
// (handlers, a lane, a tenant agent, a report back) gives it a ChildHook,
// which the program's main passes to ServeChild and the spec names
// (ChildSpec.SetHook).
package bench
