package await

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/sched"
)

// openFake opens a database over a fake connector with OpenDB and closes it
// when the test ends, checking that every connection was closed and none
// was misused. Tests of Connector alone use its DB field.
func openFake(t *testing.T, kind connKind, gates map[string]*gate) (*DB, *fakeConnector) {
	t.Helper()
	f := &fakeConnector{kind: kind, gates: gates}
	db := OpenDB(f)
	t.Cleanup(func() {
		for _, g := range gates {
			g.Open()
		}
		assert.NoError(t, db.Close())
		assert.True(t, f.closedDB.Load(), "the connector's Close was not called")
		assert.Eventually(t, func() bool { return f.opened.Load() == f.closed.Load() }, waitFor, tick,
			"connections opened %d, closed %d", f.opened.Load(), f.closed.Load())
		assert.Nil(t, f.violation.Load())
	})
	return db, f
}

// queryRows runs the fake's query for x and returns its rows as strings.
func queryRows(ctx context.Context, q querier, x int) ([]string, error) {
	return readRows(q.QueryContext(ctx, "select", x))
}

// readRows returns the rows of a query of the fake as strings.
func readRows(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n int64
		var label string
		if err := rows.Scan(&n, &label); err != nil {
			return nil, err
		}
		got = append(got, fmt.Sprintf("%d %s", n, label))
	}
	return got, rows.Err()
}

func wantRows(x int) []string {
	return []string{fmt.Sprintf("%d r0", x*10), fmt.Sprintf("%d r1", x*10+1), fmt.Sprintf("%d r2", x*10+2)}
}

// Queries through Connector alone, and through a DB, release their workers
// while the driver runs them and while their rows are fetched.
func TestConnectorReleasesWorkers(t *testing.T) {
	t.Run("Connector", func(t *testing.T) {
		testReleasesWorkers(t, func(db *DB) querier { return db.DB })
	})
	t.Run("DB", func(t *testing.T) {
		testReleasesWorkers(t, func(db *DB) querier { return db })
	})
}

// querier is what *sql.DB and *DB have in common for queries.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

func testReleasesWorkers(t *testing.T, use func(*DB) querier) {
	const n = 50
	s := schedtest.Start(t, 2)
	query, next := newGate(n), newGate(n)
	fdb, _ := openFake(t, fullConn, map[string]*gate{"query": query, "next": next})
	db := use(fdb)

	var mu sync.Mutex
	results := make(map[int][]string)
	wait := goCoroutines(t, s, n, func(ctx context.Context, i int) {
		got, err := queryRows(ctx, db, i)
		assert.NoError(t, err)
		mu.Lock()
		results[i] = got
		mu.Unlock()
	})

	// All n queries are in the driver at once, on two workers, which are
	// idle: every query has released its worker.
	schedtest.Recv(t, query.reached, "all queries in the driver")
	assert.EqualValues(t, n, query.max.Load())
	schedtest.WorkersIdle(t, s, n)
	query.Open()

	// Then all n result sets wait for their first row at once.
	schedtest.Recv(t, next.reached, "all first rows fetched at once")
	assert.EqualValues(t, n, next.max.Load())
	schedtest.WorkersIdle(t, s, n)
	next.Open()

	wait()
	require.Len(t, results, n)
	for i := range n {
		assert.Equal(t, wantRows(i), results[i], "query %d", i)
	}
}

func TestConnectorOutsideCoroutine(t *testing.T) {
	db, f := openFake(t, fullConn, nil)
	ctx := context.Background()
	got, err := queryRows(ctx, db, 4)
	require.NoError(t, err)
	assert.Equal(t, wantRows(4), got)
	res, err := db.ExecContext(ctx, "insert", 1, "a")
	require.NoError(t, err)
	affected, err := res.RowsAffected()
	require.NoError(t, err)
	assert.EqualValues(t, 2, affected)
	require.NoError(t, db.PingContext(ctx))
	assert.Contains(t, f.Log(), "ping")
}

func TestConnectorFallsBackToPrepare(t *testing.T) {
	s := schedtest.Start(t, 1)
	db, f := openFake(t, minimalConn, nil)
	inCoroutine(t, s, func(ctx context.Context) {
		res, err := db.ExecContext(ctx, "insert", 7, "x")
		if assert.NoError(t, err) {
			affected, err := res.RowsAffected()
			assert.NoError(t, err)
			assert.EqualValues(t, 2, affected)
		}
		got, err := queryRows(ctx, db, 3)
		assert.NoError(t, err)
		assert.Equal(t, wantRows(3), got)

		// The legacy interfaces take no named arguments.
		_, err = db.ExecContext(ctx, "insert", sql.Named("a", 1))
		assert.ErrorContains(t, err, "driver does not support the use of Named Parameters")

		// Nor does the legacy Begin take options.
		_, err = db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		assert.ErrorContains(t, err, "driver does not support read-only transactions")

		// Ping is a no-op without Pinger.
		assert.NoError(t, db.PingContext(ctx))

		// Result sets without the optional interfaces.
		rows, err := db.QueryContext(ctx, "select", 1)
		if assert.NoError(t, err) {
			types, err := rows.ColumnTypes()
			assert.NoError(t, err)
			if assert.Len(t, types, 2) {
				assert.Equal(t, reflect.TypeFor[any](), types[0].ScanType())
				assert.Empty(t, types[0].DatabaseTypeName())
			}
			for rows.Next() {
			}
			assert.False(t, rows.NextResultSet())
			assert.NoError(t, rows.Err())
			assert.NoError(t, rows.Close())
		}
	})
	assert.Equal(t, []string{
		// ExecContext: ErrSkip from the wrapper, then a prepared statement.
		"prepare insert", "stmt exec", "exec insert [7 x]", "close stmt insert",
		// QueryContext likewise; the statement closes with the rows.
		"prepare select", "stmt query", "query select [3]", "close rows", "close stmt select",
		// The named argument fails when the statement converts it.
		"prepare insert", "close stmt insert",
		"prepare select", "stmt query", "query select [1]", "close rows", "close stmt select",
	}, f.Log())
}

func TestConnectorPreparedStatement(t *testing.T) {
	s := schedtest.Start(t, 1)
	db, f := openFake(t, fullConn, nil)
	inCoroutine(t, s, func(ctx context.Context) {
		st, err := db.PrepareContext(ctx, "select")
		if !assert.NoError(t, err) {
			return
		}
		got, err := readRows(st.QueryContext(ctx, 5))
		assert.NoError(t, err)
		assert.Equal(t, wantRows(5), got)
		_, err = st.ExecContext(ctx, 8)
		assert.NoError(t, err)
		assert.NoError(t, st.Close())
	})
	assert.Equal(t, []string{
		"prepare select", "stmt query", "query select [5]", "close rows",
		"stmt exec", "exec select [8]", "close stmt select",
	}, f.Log())
}

func TestConnectorTx(t *testing.T) {
	s := schedtest.Start(t, 1)
	commit := newGate(1)
	db, f := openFake(t, fullConn, map[string]*gate{"commit": commit})
	committed := make(chan error, 1)
	inCoroutine(t, s, func(ctx context.Context) {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if !assert.NoError(t, err) {
			return
		}
		got, err := queryRows(ctx, tx, 2)
		assert.NoError(t, err)
		assert.Equal(t, wantRows(2), got)
		_, err = tx.ExecContext(ctx, "update", 1)
		assert.NoError(t, err)
		// Commit waits off the worker, with BeginTx's context.
		go func() {
			<-commit.reached
			schedtest.WorkersIdle(t, s, 1)
			commit.Open()
		}()
		committed <- tx.Commit()
	})
	assert.NoError(t, schedtest.Recv(t, committed, "commit"))

	inCoroutine(t, s, func(ctx context.Context) {
		tx, err := db.BeginTx(ctx, nil)
		if !assert.NoError(t, err) {
			return
		}
		_, err = tx.ExecContext(ctx, "update", 2)
		assert.NoError(t, err)
		assert.NoError(t, tx.Rollback())
		assert.ErrorIs(t, tx.Commit(), sql.ErrTxDone)
	})
	assert.Equal(t, []string{
		"begin tx read-only=true", "query select [2]", "close rows", "exec update [1]", "commit",
		"begin tx read-only=false", "exec update [2]", "rollback",
	}, f.Log())
}

func TestConnectorRows(t *testing.T) {
	s := schedtest.Start(t, 1)
	db, _ := openFake(t, fullConn, nil)
	inCoroutine(t, s, func(ctx context.Context) {
		rows, err := db.QueryContext(ctx, "select", 6)
		if !assert.NoError(t, err) {
			return
		}
		defer rows.Close()
		types, err := rows.ColumnTypes()
		assert.NoError(t, err)
		if assert.Len(t, types, 2) {
			assert.Equal(t, "INT", types[0].DatabaseTypeName())
			assert.Equal(t, "TEXT", types[1].DatabaseTypeName())
			assert.Equal(t, reflect.TypeFor[string](), types[1].ScanType())
			_, ok := types[0].Length()
			assert.False(t, ok)
		}
		var sets [][]int64
		for {
			var set []int64
			for rows.Next() {
				var n int64
				var label string
				assert.NoError(t, rows.Scan(&n, &label))
				set = append(set, n)
			}
			sets = append(sets, set)
			if !rows.NextResultSet() {
				break
			}
		}
		assert.NoError(t, rows.Err())
		assert.Equal(t, [][]int64{{60, 61, 62}, {-6}}, sets)
	})
}

func TestConnectorMirrorsOptionalInterfaces(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind      connKind
		resetting bool
	}{{fullConn, false}, {minimalConn, false}, {resetConn, true}} {
		db, f := openFake(t, tc.kind, nil)
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		require.NoError(t, conn.Raw(func(dc any) error {
			_, r := dc.(driver.SessionResetter)
			_, v := dc.(driver.Validator)
			assert.Equal(t, tc.resetting, r, "SessionResetter, kind %d", tc.kind)
			assert.Equal(t, tc.resetting, v, "Validator, kind %d", tc.kind)
			u, ok := dc.(interface{ Unwrap() driver.Conn })
			if assert.True(t, ok) {
				assert.IsType(t, (*baseConn)(nil), unwrapBase(u.Unwrap()))
			}
			return nil
		}))
		require.NoError(t, conn.Close())
		if tc.resetting {
			// The pooled connection is reset before its next use.
			_, err := queryRows(ctx, db, 1)
			require.NoError(t, err)
			assert.Contains(t, f.Log(), "reset")
		}
	}
	// Wrapping twice changes nothing.
	c := Connector(&fakeConnector{})
	assert.True(t, c == Connector(c))
}

func unwrapBase(c driver.Conn) driver.Conn {
	switch c := c.(type) {
	case ctxConn:
		return c.baseConn
	case *resettingConn:
		return c.baseConn
	}
	return c
}

// A scheduler stopping while a driver call runs abandons the call: the
// handler gets sched.ErrStopped at once, the connection is discarded rather
// than reused while still busy, and it is closed only once the call returns,
// after what the call returned has been released.
func TestConnectorStopAbandonsCall(t *testing.T) {
	schedtest.SkipWithoutExecutor(t)
	s, err := sched.New(sched.Config{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	query := newGate(1)
	db, f := openFake(t, fullConn, map[string]*gate{"query": query})

	res := make(chan error, 1)
	require.NoError(t, s.Go(context.Background(), 0, func(ctx context.Context) {
		_, err := queryRows(ctx, db.DB, 1) // Connector alone
		res <- err
	}))
	schedtest.Recv(t, query.reached, "the query in the driver")

	stopCtx, cancel := context.WithCancel(context.Background())
	cancel() // cancel the coroutines rather than wait for them
	require.ErrorIs(t, s.Stop(stopCtx), context.Canceled)
	err = schedtest.Recv(t, res, "the handler's error")
	assert.ErrorIs(t, err, sched.ErrStopped)
	assert.Zero(t, f.closed.Load(), "connection closed while the abandoned call runs")

	query.Open()
	require.Eventually(t, func() bool { return f.closed.Load() == 1 }, waitFor, tick)
	assert.Equal(t, []string{"query select [1]", "close rows", "close conn"}, f.Log())
	assert.Nil(t, f.violation.Load())
}

func TestConnectorErrorsPassThrough(t *testing.T) {
	// A wrong argument fails in the fake's QueryContext; the error comes
	// back unchanged.
	s := schedtest.Start(t, 1)
	db, _ := openFake(t, fullConn, nil)
	inCoroutine(t, s, func(ctx context.Context) {
		_, err := db.QueryContext(ctx, "select", "not a number")
		assert.EqualError(t, err, "fake: argument of type string")
		_, err = db.QueryContext(ctx, "select")
		assert.EqualError(t, err, "fake: want 1 argument, got 0")
	})
}

// The same database/sql calls, on a database over the plain connector, over
// Connector alone and through a DB, do the same driver calls and return the
// same results, for each kind of connection.
func TestConnectorKeepsDatabaseSQLBehaviour(t *testing.T) {
	s := schedtest.Start(t, 1)
	for _, kind := range []connKind{fullConn, minimalConn, resetConn, legacyConn} {
		plain := &fakeConnector{kind: kind}
		plainDB := sql.OpenDB(plain)
		want := dbScenario[*sql.Stmt, *sql.Row](context.Background(), plainDB)
		require.NoError(t, plainDB.Close())
		wantLog := plain.Log()

		check := func(name string, f *fakeConnector, got []string) {
			t.Helper()
			assert.Equal(t, want, got, "%s, kind %d", name, kind)
			assert.Equal(t, wantLog, f.Log(), "%s, kind %d", name, kind)
			assert.Equal(t, f.opened.Load(), f.closed.Load(), "%s, kind %d", name, kind)
			assert.Nil(t, f.violation.Load(), "%s, kind %d", name, kind)
		}

		f := &fakeConnector{kind: kind}
		wrapped := sql.OpenDB(Connector(f))
		var got []string
		inCoroutine(t, s, func(ctx context.Context) { got = dbScenario[*sql.Stmt, *sql.Row](ctx, wrapped) })
		require.NoError(t, wrapped.Close())
		check("Connector", f, got)

		f = &fakeConnector{kind: kind}
		db := OpenDB(f)
		inCoroutine(t, s, func(ctx context.Context) { got = dbScenario[*Stmt, *Row](ctx, db) })
		require.NoError(t, db.Close())
		check("DB", f, got)
	}
}

// What dbScenario needs of a row, a statement and a database: *sql.Row,
// *sql.Stmt and *sql.DB, or *Row, *Stmt and *DB.
type (
	scenarioRow interface{ Scan(...any) error }

	scenarioStmt[R scenarioRow] interface {
		QueryContext(context.Context, ...any) (*sql.Rows, error)
		QueryRowContext(context.Context, ...any) R
		Close() error
	}

	scenarioDB[S scenarioStmt[R], R scenarioRow] interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		QueryRowContext(context.Context, string, ...any) R
		PingContext(context.Context) error
		BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
		PrepareContext(context.Context, string) (S, error)
	}
)

// dbScenario makes a series of database/sql calls on db and returns what
// they returned, as text.
func dbScenario[S scenarioStmt[R], R scenarioRow](ctx context.Context, db scenarioDB[S, R]) []string {
	var out []string
	note := func(v ...any) { out = append(out, strings.TrimSpace(fmt.Sprintln(v...))) }
	res, err := db.ExecContext(ctx, "insert", 1, "a")
	note("exec", err)
	if err == nil {
		n, err := res.RowsAffected()
		note("affected", n, err)
	}
	_, err = db.ExecContext(ctx, "insert", sql.Named("a", 1))
	note("named exec", err)
	rows, err := db.QueryContext(ctx, "select", sql.Named("a", 1))
	note("named query", err)
	if err == nil {
		note("named rows", rows.Close())
	}
	rows, err = db.QueryContext(ctx, "select", 2)
	note("query", err)
	if err == nil {
		types, err := rows.ColumnTypes()
		note("types", err)
		for _, ct := range types {
			l, okl := ct.Length()
			nl, oknl := ct.Nullable()
			p, sc, okp := ct.DecimalSize()
			note(ct.Name(), ct.ScanType(), ct.DatabaseTypeName(), l, okl, nl, oknl, p, sc, okp)
		}
		for {
			for rows.Next() {
				var n int64
				var label string
				note("scan", rows.Scan(&n, &label), n, label)
			}
			if !rows.NextResultSet() {
				break
			}
			note("next set")
		}
		note("rows", rows.Err(), rows.Close())
	}
	var n int64
	var label string
	note("row", db.QueryRowContext(ctx, "select", 5).Scan(&n, &label), n, label)
	note("bad row", db.QueryRowContext(ctx, "select", "x").Scan(&n, &label))
	note("ping", db.PingContext(ctx))
	for _, opts := range []*sql.TxOptions{nil, {ReadOnly: true}, {Isolation: sql.LevelSerializable}} {
		tx, err := db.BeginTx(ctx, opts)
		note("begin", err)
		if err == nil {
			_, err = tx.ExecContext(ctx, "update", 3)
			note("tx exec", err)
			note("commit", tx.Commit())
		}
	}
	st, err := db.PrepareContext(ctx, "select")
	note("prepare", err)
	if err == nil {
		got, err := readRows(st.QueryContext(ctx, 4))
		note("stmt query", got, err)
		note("stmt row", st.QueryRowContext(ctx, 6).Scan(&n, &label), n, label)
		note("stmt close", st.Close())
	}
	return out
}
