package await

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
)

// A fake database/sql driver. Its queries return, for an argument x, the
// rows (x*10+k, "rk") for k = 0, 1, 2, as columns n (INT) and label (TEXT).
// Gates can hold its calls, and it logs what it does.

// connKind says which optional interfaces the fake's connections have.
type connKind int

const (
	fullConn    connKind = iota // the context interfaces and Pinger
	minimalConn                 // only driver.Conn; statements only legacy Exec and Query
	resetConn                   // fullConn plus SessionResetter and Validator
	legacyConn                  // minimalConn plus the legacy Execer and Queryer
)

type fakeConnector struct {
	kind connKind
	// Gates for the calls of that name, nil for none: "query"
	// (QueryContext), "next" (the first Next of a result set), "commit".
	gates map[string]*gate
	// drv is what Driver returns; nil means fakeDriver{}.
	drv driver.Driver

	mu  sync.Mutex
	log []string

	opened, closed atomic.Int32
	closedDB       atomic.Bool // the connector's Close was called
	violation      atomic.Value
}

var _ io.Closer = (*fakeConnector)(nil)

func (f *fakeConnector) record(format string, args ...any) {
	f.mu.Lock()
	f.log = append(f.log, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// Log returns what the fake did, in order.
func (f *fakeConnector) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *fakeConnector) pass(ctx context.Context, name string) error {
	return f.gates[name].pass(ctx)
}

func (f *fakeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	f.opened.Add(1)
	c := &baseConn{f: f}
	switch f.kind {
	case minimalConn:
		return c, nil
	case resetConn:
		return &resettingConn{ctxConn{c}}, nil
	case legacyConn:
		return legacyExecConn{c}, nil
	}
	return ctxConn{c}, nil
}

func (f *fakeConnector) Driver() driver.Driver {
	if f.drv != nil {
		return f.drv
	}
	return fakeDriver{}
}

func (f *fakeConnector) Close() error { f.closedDB.Store(true); return nil }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake: use the connector")
}

// baseConn is a connection with only driver.Conn. busy counts its calls
// under way, to catch a Close in the middle of one.
type baseConn struct {
	f      *fakeConnector
	busy   atomic.Int32
	closed atomic.Bool
}

func (c *baseConn) enter() func() {
	if c.closed.Load() {
		c.f.violation.Store("call on a closed connection")
	}
	c.busy.Add(1)
	return func() { c.busy.Add(-1) }
}

func (c *baseConn) Prepare(query string) (driver.Stmt, error) {
	defer c.enter()()
	c.f.record("prepare %s", query)
	return &fakeStmt{c: c, query: query}, nil
}

func (c *baseConn) Close() error {
	if c.busy.Load() != 0 {
		c.f.violation.Store("connection closed during a call")
	}
	if c.closed.Swap(true) {
		c.f.violation.Store("connection closed twice")
	}
	c.f.closed.Add(1)
	c.f.record("close conn")
	return nil
}

func (c *baseConn) Begin() (driver.Tx, error) {
	defer c.enter()()
	c.f.record("begin")
	return &fakeTx{c: c}, nil
}

func (c *baseConn) query(ctx context.Context, query string, args []driver.Value) (driver.Rows, error) {
	if err := c.f.pass(ctx, "query"); err != nil {
		return nil, err
	}
	c.f.record("query %s %v", query, args)
	if len(args) != 1 {
		return nil, fmt.Errorf("fake: want 1 argument, got %d", len(args))
	}
	x, ok := args[0].(int64)
	if !ok {
		return nil, fmt.Errorf("fake: argument of type %T", args[0])
	}
	r := &fakeRows{c: c, ctx: ctx, sets: [][][]driver.Value{
		{{x * 10, "r0"}, {x*10 + 1, "r1"}, {x*10 + 2, "r2"}},
		{{-x, "second"}},
	}}
	if c.f.kind == minimalConn || c.f.kind == legacyConn {
		r.sets = r.sets[:1]
		return r, nil
	}
	return richRows{r}, nil
}

func (c *baseConn) exec(query string, args []driver.Value) (driver.Result, error) {
	c.f.record("exec %s %v", query, args)
	return driver.RowsAffected(len(args)), nil
}

// ctxConn adds the context interfaces and Pinger.
type ctxConn struct{ *baseConn }

var (
	_ driver.ConnPrepareContext = ctxConn{}
	_ driver.ConnBeginTx        = ctxConn{}
	_ driver.ExecerContext      = ctxConn{}
	_ driver.QueryerContext     = ctxConn{}
	_ driver.Pinger             = ctxConn{}
)

func (c ctxConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Prepare(query)
}

func (c ctxConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	defer c.enter()()
	c.f.record("begin tx read-only=%v", opts.ReadOnly)
	return &fakeTx{c: c.baseConn}, nil
}

func (c ctxConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	defer c.enter()()
	return c.exec(query, values(args))
}

func (c ctxConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	defer c.enter()()
	return c.query(ctx, query, values(args))
}

func (c ctxConn) Ping(ctx context.Context) error {
	defer c.enter()()
	c.f.record("ping")
	return nil
}

// legacyExecConn adds the legacy Execer and Queryer.
type legacyExecConn struct{ *baseConn }

var (
	_ driver.Execer  = legacyExecConn{}
	_ driver.Queryer = legacyExecConn{}
)

func (c legacyExecConn) Exec(query string, args []driver.Value) (driver.Result, error) {
	defer c.enter()()
	return c.exec(query, args)
}

func (c legacyExecConn) Query(query string, args []driver.Value) (driver.Rows, error) {
	defer c.enter()()
	return c.query(context.Background(), query, args)
}

// resettingConn adds SessionResetter and Validator.
type resettingConn struct{ ctxConn }

func (c *resettingConn) ResetSession(ctx context.Context) error {
	c.f.record("reset")
	return nil
}

func (c *resettingConn) IsValid() bool { return true }

func values(named []driver.NamedValue) []driver.Value {
	v := make([]driver.Value, len(named))
	for i, nv := range named {
		v[i] = nv.Value
	}
	return v
}

// fakeStmt is a statement with only the legacy Exec and Query.
type fakeStmt struct {
	c     *baseConn
	query string
}

func (s *fakeStmt) Close() error {
	s.c.f.record("close stmt %s", s.query)
	return nil
}

func (s *fakeStmt) NumInput() int { return -1 }

func (s *fakeStmt) Exec(args []driver.Value) (driver.Result, error) {
	defer s.c.enter()()
	s.c.f.record("stmt exec")
	return s.c.exec(s.query, args)
}

func (s *fakeStmt) Query(args []driver.Value) (driver.Rows, error) {
	defer s.c.enter()()
	s.c.f.record("stmt query")
	return s.c.query(context.Background(), s.query, args)
}

type fakeTx struct{ c *baseConn }

func (t *fakeTx) Commit() error {
	defer t.c.enter()()
	if err := t.c.f.pass(context.Background(), "commit"); err != nil {
		return err
	}
	t.c.f.record("commit")
	return nil
}

func (t *fakeTx) Rollback() error {
	defer t.c.enter()()
	t.c.f.record("rollback")
	return nil
}

// fakeRows is a result set of the minimal kind; richRows adds further
// result sets and column types.
type fakeRows struct {
	c    *baseConn
	ctx  context.Context // the query's, for the "next" gate
	sets [][][]driver.Value
	set  int
	pos  int
	next int // Next calls
}

func (r *fakeRows) Columns() []string { return []string{"n", "label"} }

func (r *fakeRows) Close() error {
	r.c.f.record("close rows")
	return nil
}

func (r *fakeRows) Next(dest []driver.Value) error {
	defer r.c.enter()()
	r.next++
	if r.next == 1 {
		if err := r.c.f.pass(r.ctx, "next"); err != nil {
			return err
		}
	}
	rows := r.sets[r.set]
	if r.pos == len(rows) {
		return io.EOF
	}
	copy(dest, rows[r.pos])
	r.pos++
	return nil
}

type richRows struct{ *fakeRows }

var (
	_ driver.RowsNextResultSet              = richRows{}
	_ driver.RowsColumnTypeDatabaseTypeName = richRows{}
)

func (r richRows) HasNextResultSet() bool { return r.set+1 < len(r.sets) }

func (r richRows) NextResultSet() error {
	if !r.HasNextResultSet() {
		return io.EOF
	}
	r.set++
	r.pos = 0
	return nil
}

func (r richRows) ColumnTypeDatabaseTypeName(i int) string { return []string{"INT", "TEXT"}[i] }

func (r richRows) ColumnTypeScanType(i int) reflect.Type {
	return []reflect.Type{reflect.TypeFor[int64](), reflect.TypeFor[string]()}[i]
}
