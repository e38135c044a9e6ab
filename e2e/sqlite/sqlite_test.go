// Package sqlite_test runs await's database wrapper on a real driver without
// driver.DriverContext, modernc.org/sqlite.
package sqlite_test

import (
	"context"
	"database/sql/driver"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // registers "sqlite", a driver without driver.DriverContext

	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/internal/schedtest"
	"github.com/sluice-go/sluice/lanes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// isWrapped reports whether db's connections are await's.
func isWrapped(t *testing.T, db *await.DB) bool {
	t.Helper()
	c, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer c.Close()
	var wrapped bool
	require.NoError(t, c.Raw(func(dc any) error {
		_, wrapped = dc.(interface{ Unwrap() driver.Conn })
		return nil
	}))
	return wrapped
}

// An unknown driver's error lists the registered ones, sqlite among them.
func TestOpenUnknownDriverListsSQLite(t *testing.T) {
	db, err := await.Open("no-such-driver", "x")
	assert.Nil(t, db)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown driver "no-such-driver"`)
	assert.Contains(t, err.Error(), "sqlite", "the registered drivers are listed")
}

// A real driver without driver.DriverContext, modernc.org/sqlite, on a
// database file: a statement that waits for the database's write lock, held
// by a transaction begun elsewhere, waits off the worker, and then the
// coroutine reads what both wrote.
func TestOpenSQLite(t *testing.T) {
	schedtest.SkipWithoutExecutor(t) // before a transaction holds the lock
	dsn := "file:" + filepath.Join(t.TempDir(), "app.db") + "?_pragma=busy_timeout(10000)"
	db, err := await.Open("sqlite", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	assert.True(t, isWrapped(t, db))
	_, ok := db.Driver().(driver.DriverContext)
	require.False(t, ok, "this test wants a driver without DriverContext")

	ctx := context.Background()
	_, err = db.ExecContext(ctx, "create table items (id integer primary key, name text not null)")
	require.NoError(t, err)
	// A transaction that has written holds the write lock until it commits.
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, "insert into items (name) values (?)", "first")
	require.NoError(t, err)

	s := schedtest.Start(t, 1)
	type result struct {
		names []string
		count int
		err   error
	}
	res := make(chan result, 1)
	require.NoError(t, s.Go(context.Background(), lanes.Upstream, func(ctx context.Context) {
		var r result
		defer func() { res <- r }()
		// Waits in the driver, for the lock, until the holder commits.
		if _, r.err = db.ExecContext(ctx, "insert into items (name) values (?)", "second"); r.err != nil {
			return
		}
		rows, err := db.QueryContext(ctx, "select name from items order by id")
		if r.err = err; err != nil {
			return
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if r.err = rows.Scan(&name); r.err != nil {
				return
			}
			r.names = append(r.names, name)
		}
		if r.err = rows.Err(); r.err != nil {
			return
		}
		r.err = db.QueryRowContext(ctx, "select count(*) from items").Scan(&r.count)
	}))

	// The insert waits off the only worker, which runs a plain task
	// meanwhile.
	schedtest.WorkersIdle(t, s, 1)
	ran := make(chan struct{})
	require.NoError(t, s.Submit(lanes.Upstream, func() { close(ran) }))
	schedtest.Recv(t, ran, "a plain task while the insert waits")
	select {
	case r := <-res:
		t.Fatalf("the insert did not wait for the lock: %+v", r)
	default:
	}

	require.NoError(t, holder.Commit())
	r := schedtest.Recv(t, res, "the coroutine")
	require.NoError(t, r.err)
	assert.Equal(t, []string{"first", "second"}, r.names)
	assert.Equal(t, 2, r.count)
}
