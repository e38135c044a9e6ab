package ratelimit

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// TableSource gives the whole quota table (the file format of AppendTable)
// each time it is asked: a file, one value of a store. Load must return
// the table as written last, whole; the Reloader checks it and keeps the
// previous table when it is not valid.
type TableSource interface {
	Load(ctx context.Context) ([]byte, error)
}

// FileSource reads the table from the file at Path. Writers should replace
// the file whole (write another file, then rename it over the old one) so
// that a reader never sees half of it; a half-written file fails its
// checksum and is not used anyway.
type FileSource struct {
	Path string
}

// Load reads the whole file.
func (f FileSource) Load(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return os.ReadFile(f.Path)
}

// Defaults for the zero values of ReloadConfig.
const (
	// DefaultReloadPeriod is how often a Reloader reads its table.
	DefaultReloadPeriod = 10 * time.Second
	// DefaultMaxTableKeys bounds the keys of a table: N, the number of
	// slots the constant work is sized for.
	DefaultMaxTableKeys = 100_000
)

// ReloadConfig configures a Reloader.
type ReloadConfig struct {
	// Period is the time between two reads of the table; zero means
	// DefaultReloadPeriod.
	Period time.Duration
	// MaxKeys is the most keys a table may hold (N); a larger table is
	// refused like a corrupt one. Zero means DefaultMaxTableKeys.
	MaxKeys int
	// OnError, if set, is called with each failed reload's error (the
	// previous table stays), on the goroutine that reloaded.
	OnError func(error)
}

// Reloader keeps a Limiter's per-key quotas equal to a table that the owner
// of the configuration rewrites whole: every Period it reads the whole
// table, whatever changed, checks it (checksum, count, syntax), and swaps
// it into the Limiter at once (Limiter.SetTable). This is constant work:
// the same read, parse and swap whether one quota changed, all of them, or
// none, so a change of every quota at once costs nothing more than a quiet
// period. A table that fails is not used, the previous one stays, and the
// failure is counted: bad input loses nothing, and the next good table
// heals it.
type Reloader struct {
	l       *Limiter
	src     TableSource
	period  time.Duration
	maxKeys int
	onError func(error)

	loads, failures atomic.Int64
	lastErr         atomic.Pointer[error]
	loadedAt        atomic.Int64 // Unix ns of the last table swapped in
}

// NewReloader returns a Reloader of l's quotas from src. It fails, naming
// the value, for a nil Limiter or source, or a negative period or key
// limit.
func NewReloader(l *Limiter, src TableSource, opts ReloadConfig) (*Reloader, error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("ratelimit: NewReloader: the Limiter is nil")
	case src == nil:
		return nil, fmt.Errorf("ratelimit: NewReloader: the TableSource is nil")
	case opts.Period < 0:
		return nil, fmt.Errorf("ratelimit: ReloadConfig.Period is %v: it must not be negative (zero means %v)", opts.Period, DefaultReloadPeriod)
	case opts.MaxKeys < 0:
		return nil, fmt.Errorf("ratelimit: ReloadConfig.MaxKeys is %d: it must not be negative (zero means %d)", opts.MaxKeys, DefaultMaxTableKeys)
	}
	r := &Reloader{l: l, src: src, period: opts.Period, maxKeys: opts.MaxKeys, onError: opts.OnError}
	if r.period == 0 {
		r.period = DefaultReloadPeriod
	}
	if r.maxKeys == 0 {
		r.maxKeys = DefaultMaxTableKeys
	}
	return r, nil
}

// Reload reads, checks and swaps in the table once. On failure the
// Limiter keeps its table, the failure is counted, and the error says
// why.
func (r *Reloader) Reload(ctx context.Context) error {
	err := r.reload(ctx)
	if err != nil {
		r.failures.Add(1)
		r.lastErr.Store(&err)
		if r.onError != nil {
			r.onError(err)
		}
		return err
	}
	r.loads.Add(1)
	r.loadedAt.Store(time.Now().UnixNano())
	return nil
}

func (r *Reloader) reload(ctx context.Context) error {
	data, err := r.src.Load(ctx)
	if err != nil {
		return fmt.Errorf("ratelimit: loading the quota table: %w", err)
	}
	t, err := ParseTable(data, r.maxKeys)
	if err != nil {
		return err
	}
	r.l.SetTable(t)
	return nil
}

// Run reloads at once and then every Period until ctx ends; failures are
// counted and reported to OnError, and the next period tries again. It
// returns when ctx ends.
func (r *Reloader) Run(ctx context.Context) {
	tick := time.NewTicker(r.period)
	defer tick.Stop()
	for ctx.Err() == nil {
		_ = r.Reload(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ReloadStats are a Reloader's counters.
type ReloadStats struct {
	// Loads counts tables swapped in; Failures counts reloads that kept
	// the previous table.
	Loads, Failures int64
	// LastError is the error of the last failure, or nil.
	LastError error
	// LoadedAt is when the last table was swapped in (zero before the
	// first).
	LoadedAt time.Time
	// Keys is the number of keys of the table in force.
	Keys int
}

// Stats returns the counters.
func (r *Reloader) Stats() ReloadStats {
	st := ReloadStats{Loads: r.loads.Load(), Failures: r.failures.Load(), Keys: r.l.Table().Len()}
	if e := r.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	if at := r.loadedAt.Load(); at != 0 {
		st.LoadedAt = time.Unix(0, at)
	}
	return st
}
