// Package model runs a Go function over the rows of a source in windows:
// the engine behind model outputs (writestrategy.Model), which write, for
// each source row, the rows a function computes from it.
//
// # Windows
//
// A [Runner] pulls windows of source rows (Arrow record batches) one after
// the other on the caller's goroutine, calls [Func] on up to
// Runner.Concurrency of them at a time, each under its own deadline
// (Runner.Deadline), and hands every window's output rows back on the
// caller's goroutine in window order. Memory is bounded by the windows in
// flight: a window, the function's output for it, and whatever the
// function holds, times Concurrency.
//
// Every row a window holds carries its source row's key in [KeyColumn];
// every row the function returns must carry the key of a source row of
// that window (zero, one or several output rows per source row), and the
// output batch must have exactly the declared schema ([OutputSchema]).
// A row with another key, a NULL key or a batch of another schema fails
// the window with an error matching [ErrOutput].
//
// # Incremental runs
//
// [Changes] decides, in the run's REPEATABLE READ transaction, whether a
// run reads only the source rows whose key a change touched since the
// output's last run or every row, from the position the last run stored
// with [Delta.Position]. The touched keys are the key values of the
// source's old and new images since then:
//
//   - a relation tracked by triggers and a row-store dataset registered as
//     a change source ([Facts].RowStore) both record their images in the
//     change log of package incremental/changelog: Changes reads the
//     source's window. A row-store source whose window is unknown while
//     one of its writers is in flight stores no position;
//   - an Iceberg source ([Facts].Iceberg, the position PositionIceberg and
//     a snapshot id): Changes sets [Delta.Snapshots]; the caller reads the
//     changes between them and passes their key columns to
//     [Delta.Touched], or calls [Delta.Full] when it cannot read them.
//     [Delta.KeyValues] gives the touched values of a one-column key, for
//     a key-set read of the source.
//
// The first run, a run on another sink than the last, a position not
// stored by the output's last write, an unknown window (an 'F' of a full
// rewrite, a log trimmed past the position, tracking installed since) and
// Iceberg changes touching every source row score every row; Delta.Reason
// says why. An incremental run fills a temporary table of the touched
// keys: [Delta.Cond] restricts the source read to them and
// [Delta.KeysSQL] selects the output rows the run replaces
// ([Delta.ScopeKeys] reads them as an Arrow batch, the key set of a
// scoped replace on Iceberg).
//
// # Failures
//
// The first window that fails (an error returned by the function, its
// deadline passed, a panic, an invalid output) fails the run with a
// [*WindowError] naming the window (its index and its first and last
// source keys). The windows in flight are cancelled and waited for: Run
// never returns while a call of the function is running, so a function
// that ignores its context delays the failure (but never hides it). A panic
// in the function is recovered and reported as an error matching
// [ErrPanic]; it never crashes the process.
//
// # The source row key
//
// [KeyColumn] ("__source_row_key") holds a canonical text encoding of the
// key values of the source row: the JSON array of the key values in key
// order, as Postgres prints jsonb_build_array(k1, ..., kn)::text (e.g.
// [42], ["eu", 7], [null]), with timestamps with time zone taken at UTC.
// It is one text column whatever the number and types of the key columns,
// so it can be matched as a set (a scoped replace by key, a row store
// delete by key) and read by any engine. [KeySQL] builds the expression.
package model
