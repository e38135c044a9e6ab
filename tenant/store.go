package tenant

import (
	"context"
	"time"
)

// Other names the tenants that are not tracked by name (beyond the
// heaviest Config.Tenants, or without a key): their counts and their drop
// fraction are pooled under it.
const Other = "~other"

// Usage is one tenant's counts over a report's period, on one server.
type Usage struct {
	// Tenant is the tenant's name, or Other.
	Tenant string `json:"tenant"`
	// Requests counts the tenant's requests that reached the tenant
	// policy during the period (its demand, whatever became of them);
	// the others count requests that ended during it (a request that
	// arrives in one period and ends in the next counts in both).
	Requests int64 `json:"requests"`
	// Admitted counts requests that started and ended (Done).
	Admitted int64 `json:"admitted"`
	// Rejected counts requests that the tenant policy let through but
	// that a later stage refused (a gate, the queue, the age limit) or
	// whose client went away before they started.
	Rejected int64 `json:"rejected"`
	// Dropped counts requests the tenant policy refused: the tenant's
	// drop fraction.
	Dropped int64 `json:"dropped"`
	// Blame is the tenant's share of the time the gates were closed (see
	// admit.Outcome.Blame), summed over its requests that ended.
	Blame time.Duration `json:"blame_ns"`
	// Busy is the time the tenant's admitted requests ran, summed.
	Busy time.Duration `json:"busy_ns"`
}

// Report is one server's usage over one period, as it pushes it to the
// store.
type Report struct {
	// Server identifies the server (unique per process).
	Server string `json:"server"`
	// Seq numbers the server's reports, from 1.
	Seq uint64 `json:"seq"`
	// Period is how long the counts cover.
	Period time.Duration `json:"period_ns"`
	// Closed is how long the server's gates were closed during the
	// period.
	Closed time.Duration `json:"closed_ns"`
	// Tenants holds the usage of each tenant seen during the period, the
	// pooled Other included.
	Tenants []Usage `json:"tenants"`
}

// Table is the drop table the controller writes and every server reads:
// the fraction of each tenant's requests to refuse before they start.
type Table struct {
	// Version increases with each table the controller writes.
	Version uint64 `json:"version"`
	// Drops maps a tenant's name (or Other) to its drop fraction, in
	// (0, 1]; a tenant that is not in it is not dropped.
	Drops map[string]float64 `json:"drops,omitempty"`
}

// Store is where servers and the controller meet: servers push their
// reports and read the drop table; the controller reads the reports and
// writes the table. One store serves one fleet (one key prefix).
//
// Every method is called with a context that bounds it (the agent's
// timeout); an error means the store could not be reached or answered
// nonsense, and the caller fails open.
type Store interface {
	// Push records a server's report, replacing its previous one; a
	// report not replaced within ttl ages out (a dead server's counts
	// stop counting).
	Push(ctx context.Context, r Report, ttl time.Duration) error
	// Reports returns the latest report of every server whose report has
	// not aged out, in any order.
	Reports(ctx context.Context) ([]Report, error)
	// SetTable replaces the drop table.
	SetTable(ctx context.Context, t Table) error
	// Table returns the drop table (a zero Table when none was written),
	// in one read.
	Table(ctx context.Context) (Table, error)
	// Lead takes, or keeps, the controller's lease for id for ttl, and
	// reports whether id holds it: at most one controller leads at a
	// time, and a leader that stops renewing loses the lease after ttl.
	Lead(ctx context.Context, id string, ttl time.Duration) (bool, error)
}
