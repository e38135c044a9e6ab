package await

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/internal/schedtest"
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
	assert.Contains(t, err.Error(), ctxDriverName, "the registered drivers are listed")
}

// A driver with driver.DriverContext makes the connector, which Open wraps.
func TestOpenDriverContext(t *testing.T) {
	s := schedtest.Start(t, 1) // first: off Linux it skips before a database is open
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
