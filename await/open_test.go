package await

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // registers "sqlite", a driver without driver.DriverContext

	"github.com/sluice-go/sluice/lanes"
)

// ctxDriverName is the name of ctxDriver, a driver with
// driver.DriverContext whose connectors are fakeConnectors.
const ctxDriverName = "await-test-driver-context"

var ctxDriver = &fakeCtxDriver{}

func init() { sql.Register(ctxDriverName, ctxDriver) }

type fakeCtxDriver struct {
	mu         sync.Mutex
	connectors []*fakeConnector
}

var _ driver.DriverContext = (*fakeCtxDriver)(nil)

func (d *fakeCtxDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake: use OpenConnector")
}

// OpenConnector returns a fake connector of the full kind, or an error for
// the name "bad".
func (d *fakeCtxDriver) OpenConnector(dsn string) (driver.Connector, error) {
	if dsn == "bad" {
		return nil, errors.New("fake: bad name")
	}
	f := &fakeConnector{kind: fullConn, drv: d}
	d.mu.Lock()
	d.connectors = append(d.connectors, f)
	d.mu.Unlock()
	return f, nil
}

func (d *fakeCtxDriver) made() []*fakeConnector {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*fakeConnector(nil), d.connectors...)
}

// isWrapped reports whether db's connections are Connector's.
func isWrapped(t *testing.T, db *DB) bool {
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

func TestOpenUnknownDriver(t *testing.T) {
	db, err := Open("no-such-driver", "x")
	assert.Nil(t, db)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown driver "no-such-driver"`)
	assert.Contains(t, err.Error(), "sqlite", "the registered drivers are listed")
	assert.Contains(t, err.Error(), ctxDriverName, "the registered drivers are listed")
}

// A driver with driver.DriverContext makes the connector, which Open wraps.
func TestOpenDriverContext(t *testing.T) {
	before := len(ctxDriver.made())
	db, err := Open(ctxDriverName, "good")
	require.NoError(t, err)
	made := ctxDriver.made()[before:]
	// One connector for the database that found the driver, closed at once;
	// the second is the database's.
	require.Len(t, made, 2)
	assert.True(t, made[0].closedDB.Load())
	assert.False(t, made[1].closedDB.Load())
	assert.True(t, isWrapped(t, db))

	s := startSched(t, 1)
	inCoroutine(t, s, func(ctx context.Context) {
		got, err := queryRows(ctx, db, 3)
		assert.NoError(t, err)
		assert.Equal(t, wantRows(3), got)
	})
	require.NoError(t, db.Close())
	assert.True(t, made[1].closedDB.Load())
	assert.Equal(t, made[1].opened.Load(), made[1].closed.Load())

	_, err = Open(ctxDriverName, "bad")
	assert.ErrorContains(t, err, "fake: bad name")
	assert.ErrorContains(t, err, ctxDriverName)
}

// A real driver without driver.DriverContext, modernc.org/sqlite, on a
// database file: a statement that waits for the database's write lock, held
// by a transaction begun elsewhere, waits off the worker, and then the
// coroutine reads what both wrote.
func TestOpenSQLite(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "app.db") + "?_pragma=busy_timeout(10000)"
	db, err := Open("sqlite", dsn)
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

	s := startSched(t, 1)
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
	workersIdle(t, s, 1)
	ran := make(chan struct{})
	require.NoError(t, s.Submit(lanes.Upstream, func() { close(ran) }))
	recv(t, ran, "a plain task while the insert waits")
	select {
	case r := <-res:
		t.Fatalf("the insert did not wait for the lock: %+v", r)
	default:
	}

	require.NoError(t, holder.Commit())
	r := recv(t, res, "the coroutine")
	require.NoError(t, r.err)
	assert.Equal(t, []string{"first", "second"}, r.names)
	assert.Equal(t, 2, r.count)
}
