package tenant

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sluice-go/sluice/internal/monotime"
)

// MemoryStore is a Store in memory, for servers in one process (the
// embedded default, tests, the simulation). It is safe for concurrent use.
type MemoryStore struct {
	clock func() int64

	mu      sync.Mutex
	reports map[string]memReport
	table   Table
	leader  string
	leaseTo int64
}

type memReport struct {
	r       Report
	expires int64
}

// NewMemoryStore returns an empty MemoryStore whose leases and report ages
// are on clock (monotonic nanoseconds; nil means the real clock).
func NewMemoryStore(clock func() int64) *MemoryStore {
	if clock == nil {
		clock = monotime.Clock()
	}
	return &MemoryStore{clock: clock, reports: make(map[string]memReport)}
}

// Push implements Store.
func (s *MemoryStore) Push(ctx context.Context, r Report, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.Tenants = slices.Clone(r.Tenants)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports[r.Server] = memReport{r: r, expires: s.clock() + int64(ttl)}
	return nil
}

// Reports implements Store.
func (s *MemoryStore) Reports(ctx context.Context) ([]Report, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	out := make([]Report, 0, len(s.reports))
	for id, m := range s.reports {
		if now >= m.expires {
			delete(s.reports, id)
			continue
		}
		r := m.r
		r.Tenants = slices.Clone(r.Tenants)
		out = append(out, r)
	}
	return out, nil
}

// SetTable implements Store.
func (s *MemoryStore) SetTable(ctx context.Context, t Table) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.Drops = maps.Clone(t.Drops)
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
	return nil
}

// Table implements Store.
func (s *MemoryStore) Table(ctx context.Context) (Table, error) {
	if err := ctx.Err(); err != nil {
		return Table{}, err
	}
	s.mu.Lock()
	t := s.table
	s.mu.Unlock()
	t.Drops = maps.Clone(t.Drops)
	return t, nil
}

// Lead implements Store.
func (s *MemoryStore) Lead(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if s.leader == id || s.leader == "" || now >= s.leaseTo {
		s.leader, s.leaseTo = id, now+int64(ttl)
		return true, nil
	}
	return false, nil
}
