package await

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice/sched"
)

// Connector wraps a database/sql driver connector so that connecting, and
// every driver call on the connections it makes that may wait on the
// database, goes through sched.Await: from a coroutine's own code (see the
// package documentation) the call runs off the worker, which serves other
// work meanwhile. The calls are those of database/sql/driver that take a
// context (Connect, PrepareContext, BeginTx, ExecContext, QueryContext, Ping,
// ResetSession, a statement's ExecContext and QueryContext, a result set's
// NextResultSet) and those that may wait without one: a transaction's Commit
// and Rollback, which use the context given to BeginTx; a result set's Next
// and Close, which use the context of the query; a statement's Close, which
// uses the context given to PrepareContext. (Each of these keeps its
// context as long as it lives.) A connection's own Close has no context to
// go by and runs in place.
//
// Connector covers the driver's calls only: database/sql's own wait for a
// free connection, when SetMaxOpenConns caps their number, blocks the caller
// before any driver call. OpenDB and Open wrap the connector and return a
// DB, whose calls release the worker during that wait too; use Connector
// alone where a *sql.DB must be built some other way, and wrap that in a DB
// for the pool's wait.
//
// The wrapped connection keeps database/sql's behaviour unchanged. It
// implements the optional interfaces whose absence database/sql treats like
// a no-op, and emulates that no-op when the driver lacks them, exactly as
// database/sql would: ExecContext and QueryContext fall back to the legacy
// Execer and Queryer, and without those return driver.ErrSkip, so that
// database/sql prepares a statement instead; PrepareContext, BeginTx and a
// statement's ExecContext and QueryContext fall back to Prepare, Begin, Exec
// and Query, with database/sql's checks and errors; Ping does nothing;
// NamedValueChecker defers to the statement's or the connection's checker,
// or returns driver.ErrSkip; a result set reports no further result set and
// default column types. The interfaces whose mere presence changes what
// database/sql does (driver.SessionResetter, driver.Validator, a statement's
// driver.ColumnConverter, and io.Closer on the connector) are implemented
// exactly when the driver's value implements them.
//
// sql.Conn.Raw sees the wrapper; its Unwrap() driver.Conn method returns the
// driver's connection (calls on which do not release the worker).
//
// If the scheduler cancels a coroutine while one of these calls runs, the
// call returns an error that matches both sched.ErrStopped and
// driver.ErrBadConn: the connection is still busy with the call, so
// database/sql must discard it; it is closed once the call returns, after
// whatever the call produced has been released. A call that had not started
// returns sched.ErrStopped, and leaves the connection usable, except Commit,
// which reports the same error as above so that the connection and its
// unfinished transaction are discarded. Closing a statement or result set,
// resetting a session and rolling back run in place in a cancelled
// coroutine, so that nothing leaks.
func Connector(c driver.Connector) driver.Connector {
	if c == nil {
		panic("await: Connector of a nil driver.Connector")
	}
	switch c.(type) {
	case *connector, closingConnector:
		return c
	}
	k := &connector{c: c}
	if _, ok := c.(io.Closer); ok {
		return closingConnector{k}
	}
	return k
}

// connector is what Connector returns.
type connector struct{ c driver.Connector }

// closingConnector is a connector whose driver connector is an io.Closer,
// which sql.DB.Close calls.
type closingConnector struct{ *connector }

func (k *connector) Connect(ctx context.Context) (driver.Conn, error) {
	ci, err := callOnce(ctx, k.c.Connect, func(ci driver.Conn) {
		if ci != nil {
			ci.Close()
		}
	})
	if err != nil || ci == nil {
		return nil, err
	}
	return wrapConn(ci), nil
}

func (k *connector) Driver() driver.Driver { return k.c.Driver() }

func (k closingConnector) Close() error { return k.c.(io.Closer).Close() }

// callOnce runs op through run, for a call that belongs to no connection:
// when it is abandoned, release gets what it returns (if no error).
func callOnce[T any](ctx context.Context, op func(context.Context) (T, error), release func(T)) (T, error) {
	v, err, _ := run(ctx, op, func(v T, err error) {
		if err == nil {
			release(v)
		}
	})
	return v, err
}

// errDiscarded is returned by a call on a connection that an abandoned call
// left busy or in an unknown state, and by that call.
var errDiscarded = fmt.Errorf("await: connection discarded, the scheduler stopped a call on it: %w (%w)",
	sched.ErrStopped, driver.ErrBadConn)

// connState is shared by a connection and its statements, transactions and
// result sets.
type connState struct {
	ci  driver.Conn
	bad atomic.Bool // refuse further calls: see errDiscarded

	mu      sync.Mutex
	running int  // abandoned calls still under way
	closing bool // Close was called
	closed  bool // ci.Close was called
}

// busy adds d to the count of abandoned calls under way, and closes the
// connection when that count comes back to zero after Close. Its calls for
// one abandoned call (+1 from the caller, -1 from the call's goroutine) may
// come in either order.
func (cs *connState) busy(d int) {
	cs.mu.Lock()
	cs.running += d
	now := cs.running == 0 && cs.closing && !cs.closed
	if now {
		cs.closed = true
	}
	cs.mu.Unlock()
	if now {
		cs.ci.Close()
	}
}

// close closes the connection, or, while an abandoned call is still using
// it, leaves that to the call.
func (cs *connState) close() error {
	cs.mu.Lock()
	if cs.closing {
		cs.mu.Unlock()
		return nil
	}
	cs.closing = true
	now := cs.running == 0
	cs.closed = now
	cs.mu.Unlock()
	if now {
		return cs.ci.Close()
	}
	return nil
}

// What a call does when the scheduler has cancelled its coroutine before it
// started.
type onSkip uint8

const (
	skipFail    onSkip = iota // return sched.ErrStopped
	skipInPlace               // run it in place: a close, which must not leak
	skipDiscard               // return errDiscarded: the connection is left in an unknown state
)

// call runs op, a driver call on cs's connection, through run. If the call
// is abandoned, the connection is marked bad, release (if not nil) gets what
// the call returns once it does (if no error), and the connection is then
// closed if database/sql has asked for that meanwhile.
func call[T any](cs *connState, ctx context.Context, skip onSkip, op func(context.Context) (T, error), release func(T)) (T, error) {
	var zero T
	if cs.bad.Load() {
		return zero, errDiscarded
	}
	v, err, out := run(ctx, op, func(v T, err error) {
		if err == nil && release != nil {
			release(v)
		}
		cs.busy(-1)
	})
	switch out {
	case abandoned:
		cs.bad.Store(true)
		cs.busy(+1)
		return zero, errDiscarded
	case skipped:
		switch skip {
		case skipInPlace:
			return op(ctx)
		case skipDiscard:
			cs.bad.Store(true)
			return zero, errDiscarded
		}
		return zero, err
	}
	return v, err
}

// call0 is call for an op that returns only an error.
func call0(cs *connState, ctx context.Context, skip onSkip, op func() error) error {
	_, err := call(cs, ctx, skip, func(context.Context) (struct{}, error) {
		return struct{}{}, op()
	}, nil)
	return err
}

// wrapConn wraps ci in the type that implements the optional interfaces
// whose presence matters to database/sql exactly when ci does.
func wrapConn(ci driver.Conn) driver.Conn {
	c := &conn{cs: &connState{ci: ci}}
	_, r := ci.(driver.SessionResetter)
	_, v := ci.(driver.Validator)
	switch {
	case r && v:
		return connRV{c}
	case r:
		return connR{c}
	case v:
		return connV{c}
	}
	return c
}

// conn is a wrapped connection: a driver.Conn with every optional interface
// that it can emulate, which database/sql then uses (see Connector).
type conn struct{ cs *connState }

// Variants of conn with driver.SessionResetter, driver.Validator or both.
type (
	connR  struct{ *conn }
	connV  struct{ *conn }
	connRV struct{ *conn }
)

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.SessionResetter    = connR{}
	_ driver.Validator          = connV{}
	_ driver.SessionResetter    = connRV{}
	_ driver.Validator          = connRV{}
)

// Unwrap returns the driver's connection.
func (c *conn) Unwrap() driver.Conn { return c.cs.ci }

func (c *conn) Close() error { return c.cs.close() }

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	ci := c.cs.ci
	si, err := call(c.cs, ctx, skipFail, func(ctx context.Context) (driver.Stmt, error) {
		if p, ok := ci.(driver.ConnPrepareContext); ok {
			return p.PrepareContext(ctx, query)
		}
		// As database/sql does without ConnPrepareContext.
		si, err := ci.Prepare(query)
		if err == nil && ctx.Err() != nil {
			si.Close()
			return nil, ctx.Err()
		}
		return si, err
	}, closeStmt)
	if err != nil || si == nil {
		return nil, err
	}
	return wrapStmt(c.cs, ctx, si), nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	ci := c.cs.ci
	b, hasBeginTx := ci.(driver.ConnBeginTx)
	if !hasBeginTx {
		// As database/sql does without ConnBeginTx, with its errors.
		if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) {
			return nil, errors.New("sql: driver does not support non-default isolation level")
		}
		if opts.ReadOnly {
			return nil, errors.New("sql: driver does not support read-only transactions")
		}
	}
	ti, err := call(c.cs, ctx, skipFail, func(ctx context.Context) (driver.Tx, error) {
		if hasBeginTx {
			return b.BeginTx(ctx, opts)
		}
		ti, err := ci.Begin()
		if err == nil && ctx.Err() != nil {
			ti.Rollback()
			return nil, ctx.Err()
		}
		return ti, err
	}, func(ti driver.Tx) {
		if ti != nil {
			ti.Rollback()
		}
	})
	if err != nil || ti == nil {
		return nil, err
	}
	return &tx{cs: c.cs, ctx: ctx, ti: ti}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	var op func(context.Context) (driver.Result, error)
	switch ci := c.cs.ci.(type) {
	case driver.ExecerContext:
		op = func(ctx context.Context) (driver.Result, error) { return ci.ExecContext(ctx, query, args) }
	case driver.Execer: // legacy, which database/sql still accepts
		dargs, err := namedValueToValue(args)
		if err != nil {
			return nil, err
		}
		op = func(ctx context.Context) (driver.Result, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return ci.Exec(query, dargs)
		}
	default:
		return nil, driver.ErrSkip // database/sql then prepares a statement
	}
	return call(c.cs, ctx, skipFail, op, nil)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	var op func(context.Context) (driver.Rows, error)
	switch ci := c.cs.ci.(type) {
	case driver.QueryerContext:
		op = func(ctx context.Context) (driver.Rows, error) { return ci.QueryContext(ctx, query, args) }
	case driver.Queryer: // legacy, which database/sql still accepts
		dargs, err := namedValueToValue(args)
		if err != nil {
			return nil, err
		}
		op = func(ctx context.Context) (driver.Rows, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return ci.Query(query, dargs)
		}
	default:
		return nil, driver.ErrSkip // database/sql then prepares a statement
	}
	ri, err := call(c.cs, ctx, skipFail, op, closeRows)
	if err != nil || ri == nil {
		return ri, err
	}
	return &rows{cs: c.cs, ctx: ctx, ri: ri}, nil
}

func (c *conn) Ping(ctx context.Context) error {
	p, ok := c.cs.ci.(driver.Pinger)
	if !ok {
		return nil // database/sql does not ping such a driver
	}
	return call0(c.cs, ctx, skipFail, func() error { return p.Ping(ctx) })
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.cs.ci.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip // database/sql then converts as without a checker
}

func (c *conn) resetSession(ctx context.Context) error {
	r := c.cs.ci.(driver.SessionResetter)
	// In place in a cancelled coroutine: database/sql takes an error other
	// than driver.ErrBadConn as a reset done.
	return call0(c.cs, ctx, skipInPlace, func() error { return r.ResetSession(ctx) })
}

func (c *conn) isValid() bool {
	return !c.cs.bad.Load() && c.cs.ci.(driver.Validator).IsValid()
}

// ResetSession implements driver.SessionResetter.
func (c connR) ResetSession(ctx context.Context) error { return c.resetSession(ctx) }

// IsValid implements driver.Validator.
func (c connV) IsValid() bool { return c.isValid() }

// ResetSession implements driver.SessionResetter.
func (c connRV) ResetSession(ctx context.Context) error { return c.resetSession(ctx) }

// IsValid implements driver.Validator.
func (c connRV) IsValid() bool { return c.isValid() }

// namedValueToValue converts arguments for the legacy interfaces, as
// database/sql does, with its error.
func namedValueToValue(named []driver.NamedValue) ([]driver.Value, error) {
	dargs := make([]driver.Value, len(named))
	for i, nv := range named {
		if nv.Name != "" {
			return nil, errors.New("sql: driver does not support the use of Named Parameters")
		}
		dargs[i] = nv.Value
	}
	return dargs, nil
}

func closeStmt(si driver.Stmt) {
	if si != nil {
		si.Close()
	}
}

func closeRows(ri driver.Rows) {
	if ri != nil {
		ri.Close()
	}
}
