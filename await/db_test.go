package await

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/sched"
)

// holdConn starts a coroutine that begins a transaction on db, which takes
// a connection from the pool, and keeps it while suspended off the worker
// until release closes; it then commits, or, if the scheduler cancels it
// first, rolls back. holdConn returns once the transaction holds its
// connection, with a channel that gets the coroutine's error.
func holdConn(t *testing.T, s *sched.Scheduler, db *DB, release <-chan struct{}) <-chan error {
	t.Helper()
	began := make(chan struct{})
	done := make(chan error, 1)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			done <- err
			close(began)
			return
		}
		if _, err := tx.ExecContext(ctx, "update", 1); err != nil {
			tx.Rollback()
			done <- err
			close(began)
			return
		}
		close(began)
		_, err = sched.Await(ctx, func(context.Context) (struct{}, error) {
			<-release
			return struct{}{}, nil
		})
		if err != nil {
			tx.Rollback()
			done <- err
			return
		}
		done <- tx.Commit()
	}))
	schedtest.Recv(t, began, "the transaction to begin")
	return done
}

// waitersIn waits until n callers have waited for a connection of db (the
// pool's WaitCount).
func waitersIn(t *testing.T, db *DB, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return db.Stats().WaitCount == n }, waitFor, tick,
		"callers waiting for a connection: %d, want %d", db.Stats().WaitCount, n)
}

// Each DB and Stmt method that takes a connection from the pool waits for
// one off the worker: with one connection, held by a coroutine suspended on
// the only worker, a second coroutine on that worker asks for it, and the
// worker stays free (a plain task runs meanwhile) until the first one
// commits and the second one gets the connection.
func TestDBWaitsForConnectionOffWorker(t *testing.T) {
	scan := func(r *Row) error {
		var n int64
		var label string
		if err := r.Scan(&n, &label); err != nil {
			return err
		}
		if n != 70 || label != "r0" {
			return assert.AnError
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, db *DB, st *Stmt) error
	}{
		{"QueryContext", func(ctx context.Context, db *DB, _ *Stmt) error {
			_, err := queryRows(ctx, db, 2)
			return err
		}},
		{"ExecContext", func(ctx context.Context, db *DB, _ *Stmt) error {
			_, err := db.ExecContext(ctx, "insert", 1, "a")
			return err
		}},
		{"QueryRowContext", func(ctx context.Context, db *DB, _ *Stmt) error {
			return scan(db.QueryRowContext(ctx, "select", 7))
		}},
		{"BeginTx", func(ctx context.Context, db *DB, _ *Stmt) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			return tx.Commit()
		}},
		{"Conn", func(ctx context.Context, db *DB, _ *Stmt) error {
			c, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			return c.Close()
		}},
		{"PingContext", func(ctx context.Context, db *DB, _ *Stmt) error {
			return db.PingContext(ctx)
		}},
		{"PrepareContext", func(ctx context.Context, db *DB, _ *Stmt) error {
			st, err := db.PrepareContext(ctx, "insert")
			if err != nil {
				return err
			}
			return st.Close()
		}},
		{"Stmt.ExecContext", func(ctx context.Context, _ *DB, st *Stmt) error {
			_, err := st.ExecContext(ctx, 3)
			return err
		}},
		{"Stmt.QueryContext", func(ctx context.Context, _ *DB, st *Stmt) error {
			_, err := readRows(st.QueryContext(ctx, 2))
			return err
		}},
		{"Stmt.QueryRowContext", func(ctx context.Context, _ *DB, st *Stmt) error {
			return scan(st.QueryRowContext(ctx, 7))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schedtest.Start(t, 1)
			db, f := openFake(t, fullConn, nil)
			db.SetMaxOpenConns(1)
			st, err := db.Prepare("select")
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, st.Close()) })

			release := make(chan struct{})
			committed := holdConn(t, s, db, release)

			result := make(chan error, 1)
			require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
				result <- tc.call(ctx, db, st)
			}))
			waitersIn(t, db, 1)
			// Both coroutines wait off the worker, which is free.
			schedtest.WorkersIdle(t, s, 2)
			ran := make(chan struct{})
			require.NoError(t, s.Submit(lanes.Upstream, func() { close(ran) }))
			schedtest.Recv(t, ran, "a plain task while both coroutines wait")
			select {
			case err := <-result:
				t.Fatalf("the call returned (%v) while the only connection was held", err)
			default:
			}

			close(release)
			assert.NoError(t, schedtest.Recv(t, committed, "the commit"))
			assert.NoError(t, schedtest.Recv(t, result, "the call"))
			log := f.Log()
			want := []string{"prepare select", "begin tx read-only=false", "exec update [1]", "commit"}
			require.GreaterOrEqual(t, len(log), len(want), "log %q", log)
			assert.Equal(t, want, log[:len(want)], "the call used the connection before the commit")
			assert.Equal(t, 1, db.Stats().MaxOpenConnections)
		})
	}
}

// A scheduler stopping while a coroutine waits for a connection abandons the
// wait: the coroutine gets sched.ErrStopped at once, and whatever the call
// gets once a connection comes back is released, so that the connection
// returns to the pool.
func TestDBStopAbandonsWait(t *testing.T) {
	schedtest.SkipWithoutExecutor(t)
	s, err := sched.New(sched.Config{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	db, f := openFake(t, fullConn, nil)
	db.SetMaxOpenConns(1)

	release := make(chan struct{})
	defer close(release) // ends the holder's abandoned wait
	held := holdConn(t, s, db, release)

	type outcome struct{ query, scan, rowErr error }
	res := make(chan outcome, 1)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		var o outcome
		_, o.query = queryRows(ctx, db, 2)
		// Later calls of the cancelled coroutine do not start.
		row := db.QueryRowContext(ctx, "select", 3)
		var n int64
		var label string
		o.scan, o.rowErr = row.Scan(&n, &label), row.Err()
		res <- o
	}))
	waitersIn(t, db, 1)

	stopCtx, cancel := context.WithCancel(context.Background())
	cancel() // cancel the coroutines rather than wait for them
	require.ErrorIs(t, s.Stop(stopCtx), context.Canceled)

	// The holder's wait was cancelled too: it rolled back, which gave the
	// connection to the abandoned query.
	assert.ErrorIs(t, schedtest.Recv(t, held, "the holder's error"), sched.ErrStopped)
	o := schedtest.Recv(t, res, "the waiting coroutine's errors")
	assert.ErrorIs(t, o.query, sched.ErrStopped)
	assert.ErrorIs(t, o.scan, sched.ErrStopped)
	assert.ErrorIs(t, o.rowErr, sched.ErrStopped)

	require.Eventually(t, func() bool {
		return db.Stats().InUse == 0 && slices.Contains(f.Log(), "close rows")
	}, waitFor, tick, "the abandoned query's rows were not closed: %q", f.Log())
	assert.Equal(t, []string{"begin tx read-only=false", "exec update [1]", "rollback", "query select [2]", "close rows"}, f.Log())
	assert.Equal(t, 1, db.Stats().OpenConnections, "the connection went back to the pool")
}

// A DB can wrap a *sql.DB opened elsewhere.
func TestDBWrapsPlainDB(t *testing.T) {
	s := schedtest.Start(t, 1)
	f := &fakeConnector{kind: fullConn}
	db := &DB{DB: sql.OpenDB(f)}
	defer func() { require.NoError(t, db.Close()) }()
	db.SetMaxOpenConns(1)
	inCoroutine(t, s, func(ctx context.Context) {
		got, err := queryRows(ctx, db, 4)
		assert.NoError(t, err)
		assert.Equal(t, wantRows(4), got)
	})
}
