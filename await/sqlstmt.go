package await

import (
	"context"
	"database/sql/driver"
	"io"
	"reflect"
)

// wrapStmt wraps si, prepared with ctx, in the type that implements
// driver.ColumnConverter exactly when si does.
func wrapStmt(cs *connState, ctx context.Context, si driver.Stmt) driver.Stmt {
	s := &stmt{cs: cs, ctx: ctx, si: si}
	if _, ok := si.(driver.ColumnConverter); ok { // database/sql still uses it
		return stmtCC{s}
	}
	return s
}

// stmt is a wrapped prepared statement.
type stmt struct {
	cs  *connState
	ctx context.Context // PrepareContext's, for Close
	si  driver.Stmt
}

// stmtCC is a stmt whose driver statement has a ColumnConverter, which
// changes how database/sql converts arguments.
type stmtCC struct{ *stmt }

var (
	_ driver.Stmt              = (*stmt)(nil)
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
	_ driver.ColumnConverter   = stmtCC{}
)

func (s *stmt) Close() error {
	return call0(s.cs, s.ctx, skipInPlace, s.si.Close)
}

func (s *stmt) NumInput() int { return s.si.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return call(s.cs, context.Background(), skipFail, func(context.Context) (driver.Result, error) {
		return s.si.Exec(args)
	}, nil)
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.query(context.Background(), func(context.Context) (driver.Rows, error) {
		return s.si.Query(args)
	})
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	var op func(context.Context) (driver.Result, error)
	if e, ok := s.si.(driver.StmtExecContext); ok {
		op = func(ctx context.Context) (driver.Result, error) { return e.ExecContext(ctx, args) }
	} else {
		// As database/sql does without StmtExecContext.
		dargs, err := namedValueToValue(args)
		if err != nil {
			return nil, err
		}
		op = func(ctx context.Context) (driver.Result, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return s.si.Exec(dargs)
		}
	}
	return call(s.cs, ctx, skipFail, op, nil)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := s.si.(driver.StmtQueryContext); ok {
		return s.query(ctx, func(ctx context.Context) (driver.Rows, error) { return q.QueryContext(ctx, args) })
	}
	// As database/sql does without StmtQueryContext.
	dargs, err := namedValueToValue(args)
	if err != nil {
		return nil, err
	}
	return s.query(ctx, func(ctx context.Context) (driver.Rows, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return s.si.Query(dargs)
	})
}

func (s *stmt) query(ctx context.Context, op func(context.Context) (driver.Rows, error)) (driver.Rows, error) {
	ri, err := call(s.cs, ctx, skipFail, op, closeRows)
	if err != nil || ri == nil {
		return ri, err
	}
	return &rows{cs: s.cs, ctx: ctx, ri: ri}, nil
}

// CheckNamedValue implements driver.NamedValueChecker as database/sql uses
// it: the statement's checker if it has one, else the connection's, else
// driver.ErrSkip, which makes database/sql go on as without a checker.
func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.si.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	if n, ok := s.cs.ci.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// ColumnConverter implements driver.ColumnConverter.
func (s stmtCC) ColumnConverter(idx int) driver.ValueConverter {
	return s.si.(driver.ColumnConverter).ColumnConverter(idx)
}

// tx is a wrapped transaction. Commit and Rollback have no context: they
// use BeginTx's.
type tx struct {
	cs  *connState
	ctx context.Context
	ti  driver.Tx
}

func (t *tx) Commit() error {
	// Not run in a cancelled coroutine: the connection, in a transaction
	// that is neither committed nor rolled back, must be discarded.
	return call0(t.cs, t.ctx, skipDiscard, t.ti.Commit)
}

func (t *tx) Rollback() error {
	return call0(t.cs, t.ctx, skipInPlace, t.ti.Rollback)
}

// rows is a wrapped result set. Next, Close and NextResultSet use the
// context of the query. It implements driver.RowsNextResultSet and the
// driver.RowsColumnType interfaces, answering as database/sql does in their
// absence when the driver's result set lacks them.
type rows struct {
	cs  *connState
	ctx context.Context
	ri  driver.Rows
}

var (
	_ driver.Rows                           = (*rows)(nil)
	_ driver.RowsNextResultSet              = (*rows)(nil)
	_ driver.RowsColumnTypeScanType         = (*rows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
	_ driver.RowsColumnTypeLength           = (*rows)(nil)
	_ driver.RowsColumnTypeNullable         = (*rows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*rows)(nil)
)

func (r *rows) Columns() []string { return r.ri.Columns() }

func (r *rows) Close() error {
	return call0(r.cs, r.ctx, skipInPlace, r.ri.Close)
}

// Next fetches into dest directly, unlike body reads: if the fetch is
// abandoned, database/sql closes the result set on the error and never reads
// dest again.
func (r *rows) Next(dest []driver.Value) error {
	return call0(r.cs, r.ctx, skipFail, func() error { return r.ri.Next(dest) })
}

func (r *rows) HasNextResultSet() bool {
	n, ok := r.ri.(driver.RowsNextResultSet)
	return ok && n.HasNextResultSet()
}

func (r *rows) NextResultSet() error {
	n, ok := r.ri.(driver.RowsNextResultSet)
	if !ok {
		return io.EOF // database/sql's Rows.Err reports no error for it
	}
	return call0(r.cs, r.ctx, skipFail, n.NextResultSet)
}

func (r *rows) ColumnTypeScanType(i int) reflect.Type {
	if c, ok := r.ri.(driver.RowsColumnTypeScanType); ok {
		return c.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *rows) ColumnTypeDatabaseTypeName(i int) string {
	if c, ok := r.ri.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return c.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *rows) ColumnTypeLength(i int) (int64, bool) {
	if c, ok := r.ri.(driver.RowsColumnTypeLength); ok {
		return c.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *rows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if c, ok := r.ri.(driver.RowsColumnTypeNullable); ok {
		return c.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *rows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if c, ok := r.ri.(driver.RowsColumnTypePrecisionScale); ok {
		return c.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
