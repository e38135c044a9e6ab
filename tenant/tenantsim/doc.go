// Package tenantsim simulates tenant fairness by blame (package tenant) on
// virtual time, with the real code wherever the control loop's behaviour
// comes from: each server is an admit.Pipeline with a gate.Concurrency of
// W workers, the timed queue and a tenant.Tracker as its policy; each has
// a tenant.Agent with an embedded tenant.Controller, the lease in a
// tenant.MemoryStore deciding which one leads. What is modelled is time (a
// discrete-event loop that is the pipelines', the agents' and the store's
// clock), Poisson arrivals per tenant, requests that hold a worker for
// exactly their cost, a load balancer, and a store whose calls take a
// fixed delay and fail during an outage.
//
// A Scenario describes a run (the fleet, the tenants, enforcement off for a
// while, an outage, the store's delay, the random seed) and the targets it is
// checked against; Builtin returns the scenarios of sluice simulate, Load
// reads scenarios from JSON. Run runs one, deterministically for its seed,
// in seconds of real time; WriteTable, WriteJSON and Plot give its
// results. docs/design.md ("The simulation") explains the model, and
// docs/benchmarks.md ("Tenant fairness in simulation") has its figures.
package tenantsim
