// Package tenant makes an overloaded fleet fair between tenants by cost,
// not by count: while the servers' gates are closed, the tenants whose
// requests kept them closed are dropped, each by the share of its demand
// beyond its fair share of the capacity, and nobody else is.
//
// Without it, an overloaded server refuses requests in proportion to how
// many each client sends: one tenant flooding the service makes every
// tenant's requests fail. With it:
//
//  1. Blame. Each nanosecond a server's gates are closed is shared
//     equally among the requests running on it during that nanosecond
//     (the admission pipeline measures it: admit.Outcome.Blame). A tenant
//     with many cheap requests and one with a few heavy ones are blamed
//     by the queuing they cause.
//  2. Report. Each server's Tracker (an admission policy) sums blame,
//     requests, admissions and rejections per tenant; once a period (1 s)
//     its Agent pushes them to a Store: in memory for one process, Redis
//     (NewRedisStore) for a fleet.
//  3. Control. Once a period the Controller (one leader in the fleet,
//     elected through the store, embedded in the servers or run as
//     "sluice controller") reads every server's report, predicts each
//     tenant's demand, and water-fills the capacity: a tenant is dropped
//     only by what it asks beyond its weighted fair share, and only while
//     the fleet is overloaded.
//  4. Enforcement. Each server reads the drop table and drops each
//     tenant's fraction before anything of the request starts: 429,
//     Retry-After, Sluice-Reject-Reason: tenant-share and
//     Sluice-Not-Started: 1. Drops are spread evenly (a count of the drops
//     owed, not a coin flip), and a request refused before the tracker
//     (by the age limit) pays for one. Between two tables, what a drop
//     leaves over is the dropped tenant's to lose: while an overload's
//     line stands, only its requests get the lower age limit, and the
//     others keep the full one (the Tracker is an admit.ShareKeeper). On a
//     server protected by its age limit alone, or with the timed queue, a
//     dropped tenant's requests wait at most half of it, and behind
//     everyone else's in the queue, and the Tracker lets a quarter more of
//     them through than the table keeps, so that the server stays busy
//     and refuses their excess itself.
//
// When the store is down or slow, nothing waits for it: each server keeps
// enforcing the last table it read for a while (AgentConfig.StaleAfter),
// then stops dropping and relies on its own gates.
//
// # Using it
//
// Put a Tracker among the admission policies of each server, after any
// quota and before the gates, and run an Agent beside it:
//
//	tr, _ := tenant.New(tenant.Config{Key: admit.HeaderKey("X-Api-Key")})
//	ctrl, _ := tenant.NewController(tenant.ControllerConfig{})
//	store, _ := tenant.NewRedisStore(client, tenant.RedisConfig{Fleet: "api"})
//	agent, _ := tenant.NewAgent(tenant.AgentConfig{
//		Store:      store,
//		Tracker:    tr,
//		Controller: ctrl, // every server a candidate leader; or run sluice controller
//	})
//	go agent.Run(ctx)
//	cfg := sluice.Config{Admission: admit.Config{
//		Policies: []admit.Policy{tr},
//		Gates:    gates,
//		Queue:    &admit.QueueConfig{},
//	}}
//
// The tenant is named by a header (X-Tenant by default) or any admit.Key;
// the heaviest Config.Tenants are followed by name and the rest pooled
// under Other, so a flood of random names costs bounded memory.
// Enforcement can be switched off and on live (Tracker.SetEnforce): off,
// the tracker still reports, which shows what it would do.
//
// sluice simulate runs the whole loop on virtual time, with several
// servers, the real tracker, controller and agents, and the scenarios of
// the design; docs/design.md explains the model and its choices.
package tenant
