package await

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
)

// DB is a database whose calls made from a coroutine release the worker for
// as long as they wait: for a free connection when SetMaxOpenConns caps
// their number, for a new connection to open, and for the database to
// answer. Open and OpenDB return one; it embeds the *sql.DB, so that
// configuring, closing and inspecting it (SetMaxOpenConns, SetConnMaxLifetime,
// Stats, Close, Driver and so on) are *sql.DB's methods.
//
// The methods that take a connection from the pool (ExecContext,
// QueryContext, QueryRowContext, PrepareContext, BeginTx, Conn and
// PingContext) run the whole database/sql call through sched.Await: from a
// coroutine's own code (see the package documentation), the wait for a free
// connection, opening or resetting one, and the driver calls all happen off
// the worker, which serves other work meanwhile, and the caller resumes on
// its worker once the call is over. So a handler that finds the pool
// exhausted does not hold its worker until another handler gives a
// connection back, even when that handler is suspended on the same worker
// and can only give it back once the worker is free. Elsewhere these methods
// are exactly those of *sql.DB. Each costs one trip off the worker and back
// (the driver calls inside it, already off the worker, run in place).
//
// What they return is database/sql's, and later calls on it wait for no
// other pooled connection, since a result set, transaction or sql.Conn
// keeps the one it got: with a database from Open or OpenDB, whose driver
// connector is wrapped by Connector, its row fetches, statements, commits
// and so on release the worker as Connector describes. (Each row of a
// result set is fetched through sched.Await: most drivers buffer rows, so
// that most fetches do not wait, but each still costs a trip off the worker
// and back.) The exceptions are PrepareContext (and Prepare), whose
// statement takes a connection from the pool at each use and so comes as a
// *Stmt, and QueryRowContext, whose result comes as a *Row.
//
// A DB may also wrap a *sql.DB opened elsewhere, as &DB{DB: db}; its own
// methods then release the worker as above, and what they return does so
// only if db's connector was wrapped by Connector.
//
// The methods without a context (Exec, Query, QueryRow, Begin, Ping) are
// *sql.DB's: they use context.Background and so hold the worker for their
// whole wait; use the Context variants. One limit of database/sql remains:
// it holds a connection's lock during each call on it, and a handler that
// finds that lock taken blocks its worker, which the holder, suspended on
// the same worker, may need in order to go on. So do not use one sql.Tx,
// sql.Conn or sql.Rows from two handlers at once, and do not close a
// statement that other handlers may still be using.
//
// If the scheduler cancels the coroutine while one of these calls is under
// way, the method returns sched.ErrStopped at once (a *Row then reports it
// from Scan and Err); the call goes on in the background and what it
// returns is released: a result set or statement closed, a transaction
// rolled back, a sql.Conn given back to the pool. Other errors are
// database/sql's, unchanged.
type DB struct {
	// DB is the database; its methods do not release the worker while
	// waiting for a pooled connection.
	*sql.DB
}

// Open opens a database like sql.Open, for any registered driver, and
// returns it as a *DB whose driver calls go through Connector. If the driver
// implements driver.DriverContext, its OpenConnector makes the connector;
// otherwise connections are opened by the driver's Open(dsn), as
// database/sql does. As with sql.Open, no connection is opened yet.
//
// database/sql lends out a registered driver only through a database, so
// Open first opens one with sql.Open, to get the driver, and closes it; a
// driver.DriverContext's OpenConnector is therefore called twice, the first
// connector being closed (if it is an io.Closer) at once.
//
// Open fails for a name that no driver was registered under (an import of
// the driver's package is usually what is missing; the error lists the
// registered names) and when OpenConnector fails.
func Open(driverName, dsn string) (*DB, error) {
	registered := sql.Drivers()
	if !slices.Contains(registered, driverName) {
		known := "no driver is registered"
		if len(registered) > 0 {
			known = "registered drivers: " + strings.Join(registered, ", ")
		}
		return nil, fmt.Errorf("await: unknown driver %q (forgotten import?); %s", driverName, known)
	}
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("await: open %q: %w", driverName, err)
	}
	d := probe.Driver()
	if err := probe.Close(); err != nil {
		return nil, fmt.Errorf("await: open %q: closing the database that found the driver: %w", driverName, err)
	}
	var c driver.Connector = dsnConnector{d: d, dsn: dsn}
	if dc, ok := d.(driver.DriverContext); ok {
		if c, err = dc.OpenConnector(dsn); err != nil {
			return nil, fmt.Errorf("await: open %q: %w", driverName, err)
		}
	}
	return OpenDB(c), nil
}

// OpenDB opens a database over the driver connector c, wrapped by Connector:
// sql.OpenDB(Connector(c)) as a *DB, whose calls made from a coroutine
// release the worker while they wait (see DB and Connector). It opens no
// connection yet.
func OpenDB(c driver.Connector) *DB {
	return &DB{DB: sql.OpenDB(Connector(c))}
}

// dsnConnector opens connections with the driver's Open, as database/sql
// does for a driver without driver.DriverContext.
type dsnConnector struct {
	d   driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }

func (c dsnConnector) Driver() driver.Driver { return c.d }

// ExecContext is sql.DB.ExecContext, waiting off the worker (see DB).
func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return callOnce(ctx, func(ctx context.Context) (sql.Result, error) {
		return db.DB.ExecContext(ctx, query, args...)
	}, func(sql.Result) {})
}

// QueryContext is sql.DB.QueryContext, waiting off the worker (see DB). The
// rows are database/sql's; close them, as always.
func (db *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return callOnce(ctx, func(ctx context.Context) (*sql.Rows, error) {
		return db.DB.QueryContext(ctx, query, args...)
	}, closeSQLRows)
}

// QueryRowContext is sql.DB.QueryRowContext, waiting off the worker (see
// DB). As with database/sql, errors are deferred to the Row's Scan, which
// fetches the row.
func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *Row {
	return queryRow(ctx, func(ctx context.Context) (*sql.Row, error) {
		return db.DB.QueryRowContext(ctx, query, args...), nil
	})
}

// BeginTx is sql.DB.BeginTx, waiting off the worker (see DB). The
// transaction is database/sql's: it keeps its connection until Commit or
// Rollback.
func (db *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return callOnce(ctx, func(ctx context.Context) (*sql.Tx, error) {
		return db.DB.BeginTx(ctx, opts)
	}, func(tx *sql.Tx) {
		if tx != nil {
			tx.Rollback()
		}
	})
}

// Conn is sql.DB.Conn, waiting off the worker (see DB). The connection is
// database/sql's: it is the caller's until its Close gives it back to the
// pool.
func (db *DB) Conn(ctx context.Context) (*sql.Conn, error) {
	return callOnce(ctx, db.DB.Conn, func(c *sql.Conn) {
		if c != nil {
			c.Close()
		}
	})
}

// PingContext is sql.DB.PingContext, waiting off the worker (see DB).
func (db *DB) PingContext(ctx context.Context) error {
	_, err := callOnce(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, db.DB.PingContext(ctx)
	}, func(struct{}) {})
	return err
}

// PrepareContext is sql.DB.PrepareContext, waiting off the worker (see DB).
// The statement takes a connection from the pool each time it is used, and
// its methods that take a context wait off the worker too (see Stmt).
func (db *DB) PrepareContext(ctx context.Context, query string) (*Stmt, error) {
	st, err := callOnce(ctx, func(ctx context.Context) (*sql.Stmt, error) {
		return db.DB.PrepareContext(ctx, query)
	}, func(st *sql.Stmt) {
		if st != nil {
			st.Close()
		}
	})
	if err != nil {
		return nil, err
	}
	return &Stmt{Stmt: st}, nil
}

// Prepare is PrepareContext with context.Background: it holds the worker
// while it prepares (do it before serving), but the statement's methods that
// take a context release it as Stmt describes.
func (db *DB) Prepare(query string) (*Stmt, error) {
	return db.PrepareContext(context.Background(), query)
}

// Stmt is a statement prepared on a DB. It embeds the *sql.Stmt; its
// methods that take a context run the whole database/sql call through
// sched.Await, since each takes a connection from the pool, and so release
// the worker while they wait, as DB's do. Its Close and its methods without a
// context are *sql.Stmt's. To use it in a transaction, pass the *sql.Stmt
// (s.Stmt) to sql.Tx.StmtContext.
type Stmt struct {
	// Stmt is the statement; its methods do not release the worker while
	// waiting for a pooled connection.
	*sql.Stmt
}

// ExecContext is sql.Stmt.ExecContext, waiting off the worker (see DB).
func (s *Stmt) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return callOnce(ctx, func(ctx context.Context) (sql.Result, error) {
		return s.Stmt.ExecContext(ctx, args...)
	}, func(sql.Result) {})
}

// QueryContext is sql.Stmt.QueryContext, waiting off the worker (see DB).
func (s *Stmt) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return callOnce(ctx, func(ctx context.Context) (*sql.Rows, error) {
		return s.Stmt.QueryContext(ctx, args...)
	}, closeSQLRows)
}

// QueryRowContext is sql.Stmt.QueryRowContext, waiting off the worker (see
// DB).
func (s *Stmt) QueryRowContext(ctx context.Context, args ...any) *Row {
	return queryRow(ctx, func(ctx context.Context) (*sql.Row, error) {
		return s.Stmt.QueryRowContext(ctx, args...), nil
	})
}

// Row is the result of a QueryRowContext of DB or Stmt: database/sql's
// *sql.Row, or the error (sched.ErrStopped) that kept the query from
// returning one. Its methods are those of *sql.Row.
type Row struct {
	row *sql.Row
	err error
}

// Scan copies the row's columns into dest, as sql.Row.Scan does, and
// returns sql.ErrNoRows if the query selected no row. It returns the query's
// error, if any.
func (r *Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}

// Err returns the query's error, if any, without scanning the row, as
// sql.Row.Err does.
func (r *Row) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.row.Err()
}

// queryRow runs op, a database/sql QueryRowContext, through callOnce.
func queryRow(ctx context.Context, op func(context.Context) (*sql.Row, error)) *Row {
	row, err := callOnce(ctx, op, func(row *sql.Row) {
		if row != nil {
			row.Scan() // closes its result set; the missing destinations are its error
		}
	})
	if err != nil {
		return &Row{err: err}
	}
	return &Row{row: row}
}

func closeSQLRows(rows *sql.Rows) {
	if rows != nil {
		rows.Close()
	}
}
