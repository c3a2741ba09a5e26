package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"

	"github.com/lakewrite/lakewrite/sink"
)

// seed creates and fills the source table unless a table of the same shape
// and size is already there.
func (b *bench) seed(ctx context.Context) (*phaseResult, error) {
	pool := b.env.Pool
	mark := seedMark + strconv.FormatInt(b.cfg.Rows, 10)
	var have *string
	if err := pool.QueryRow(ctx, `SELECT obj_description(to_regclass($1), 'pg_class')`, sourceTable).Scan(&have); err != nil {
		return nil, fmt.Errorf("look for %s: %w", sourceTable, err)
	}
	if have != nil && *have == mark && !b.cfg.Reseed {
		b.logf("reusing %s (%d rows); warming the cache", sourceTable, b.cfg.Rows)
		if _, err := pool.Exec(ctx, `SELECT count(*) FROM `+sourceTable); err != nil {
			return nil, err
		}
		return nil, b.checkAllVisible(ctx)
	}
	b.logf("seeding %d rows into %s", b.cfg.Rows, sourceTable)
	start := time.Now()
	stmts := []string{
		`DROP TABLE IF EXISTS ` + sourceTable,
		`CREATE TABLE ` + sourceTable + ` (
			id bigint, name text, amount numeric(12,2), ts timestamptz,
			flag bool, attrs jsonb, category text)`,
		// attrs is ~60 bytes of jsonb text; category has 4 values.
		`INSERT INTO ` + sourceTable + `
		SELECT g, 'name-' || g, ((g % 1000000) / 100.0)::numeric(12,2),
		       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
		       g % 3 = 0,
		       jsonb_build_object('k', g, 'tag', 'abcdefghij', 'v', g % 7, 'note', 'xyzxyzxyz'),
		       (ARRAY['red', 'green', 'blue', 'black'])[g % 4 + 1]
		FROM generate_series(1, ` + strconv.FormatInt(b.cfg.Rows, 10) + `) g`,
		`VACUUM (FREEZE, ANALYZE) ` + sourceTable,
		`COMMENT ON TABLE ` + sourceTable + ` IS '` + mark + `'`,
		`RESET synchronous_commit`,
	}
	// The insert commits synchronously (the embedded cluster commits
	// asynchronously): VACUUM marks a page all-visible only once the
	// inserting commit is flushed, so otherwise the table's state, and with
	// it the server's cost per row in every phase, would depend on the WAL
	// writer's timing.
	stmts = append([]string{`SET synchronous_commit TO on`}, stmts...)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	}
	if err := b.checkAllVisible(ctx); err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	return &phaseResult{Phase: "seed", Rows: b.cfg.Rows, Seconds: secs, RowsPerSec: float64(b.cfg.Rows) / secs}, nil
}

// warmBackends scans the source table once on each of n distinct pool
// connections, so that every phase reads through a server process that
// has read the table before, as the connections of a long-lived pool have.
// A backend's first pass over the table costs it much more server CPU than
// its later ones (on the machines we measured, ~0.5 s more per million rows,
// spent on the first load of each tuple's header in shared memory), and
// only the phases that hold two connections at once (e2e: the ledger's hold
// and the cursor's) would otherwise get a fresh backend.
func (b *bench) warmBackends(ctx context.Context, n int) error {
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := b.env.Pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
		conns = append(conns, c)
		// The phases' statement, as COPY: the backend itself (no parallel
		// workers) reads and sends every value; the client drops the bytes.
		if _, err := copyDiscard(ctx, c); err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
	}
	return nil
}

// checkAllVisible reports a source table whose pages are not all marked
// all-visible: every phase then checks each row's visibility on the server
// (and the first sets hint bits, writing pages out), so phases would not
// read the same table. A table seeded by an older bench gets VACUUM FREEZE;
// when that cannot mark every page either, the run goes on with a warning.
func (b *bench) checkAllVisible(ctx context.Context) error {
	var pages, visible int64
	q := `SELECT relpages, relallvisible FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass($1)`
	if err := b.env.Pool.QueryRow(ctx, q, sourceTable).Scan(&pages, &visible); err != nil {
		return fmt.Errorf("inspect %s: %w", sourceTable, err)
	}
	if visible >= pages {
		return nil
	}
	b.logf("%s: %d of %d pages all-visible; VACUUM (FREEZE)", sourceTable, visible, pages)
	if _, err := b.env.Pool.Exec(ctx, `VACUUM (FREEZE, ANALYZE) `+sourceTable); err != nil {
		return err
	}
	if err := b.env.Pool.QueryRow(ctx, q, sourceTable).Scan(&pages, &visible); err != nil {
		return fmt.Errorf("inspect %s: %w", sourceTable, err)
	}
	if visible < pages {
		b.logf("warning: %s: only %d of %d pages all-visible after VACUUM (FREEZE) (a transaction open elsewhere holds them back); the server's cost per row may differ between phases",
			sourceTable, visible, pages)
	}
	return nil
}

// copyBinary is the baseline: COPY (query) TO STDOUT (FORMAT binary) read
// by pgx and discarded.
func (b *bench) copyBinary(ctx context.Context) (int64, int64, error) {
	conn, err := b.env.Pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	n, err := copyDiscard(ctx, conn)
	return n, 0, err
}

// copyDiscard runs the phases' statement on conn as COPY ... TO STDOUT
// (FORMAT binary), dropping the bytes, and returns the rows sent.
func copyDiscard(ctx context.Context, conn *pgxpool.Conn) (int64, error) {
	tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, `COPY (`+query+`) TO STDOUT (FORMAT binary)`)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (b *bench) cursorOptions() *cursor.Options {
	return &cursor.Options{Mode: cursor.Direct, BatchSize: b.cfg.Batch}
}

// cursorOnly reads the query as Arrow batches and drops them: the decode
// alone, to attribute the end-to-end time.
func (b *bench) cursorOnly(ctx context.Context) (int64, int64, error) {
	s, err := cursor.Batches(ctx, b.env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return 0, 0, err
	}
	var n int64
	for rec, err := range s.All() {
		if err != nil {
			return n, 0, err
		}
		n += rec.NumRows()
		rec.Release()
	}
	return n, 0, nil
}

// owned adapts cursor's ownership (the consumer releases each batch) to the
// facade's (batches are borrowed for the duration of the yield).
func owned(seq iter.Seq2[arrow.RecordBatch, error]) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range seq {
			ok := yield(rec, err)
			if rec != nil {
				rec.Release()
			}
			if !ok {
				return
			}
		}
	}
}

// endToEnd is the Iceberg arm as a pipeline runs it: ledger intent ->
// cursor -> facade replace (one snapshot carrying the txn id) -> ledger
// commit with the commit result.
func (b *bench) endToEnd(ctx context.Context) (*e2eResult, error) {
	return b.writeOutput(ctx, b.env.Facade, datasetID)
}

// writeOutput is endToEnd into dataset id through fac.
func (b *bench) writeOutput(ctx context.Context, fac *facade.Facade, id string) (_ *e2eResult, err error) {
	env := b.env
	in, err := env.Ledger.Open(ctx, ledger.OpenParams{
		DatasetID: id, WriterID: writerID, Sink: sink.Iceberg, WriteMode: facade.Replace,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if aerr := env.Ledger.Abort(actx, in, err); aerr != nil {
				err = errors.Join(err, fmt.Errorf("abort intent %s: %w", in.ID, aerr))
			}
		}
	}()
	s, err := cursor.Batches(ctx, env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return nil, err
	}
	res, err := fac.Write(ctx,
		facade.Target{DatasetID: id, WriterID: writerID, Workspace: "bench"},
		facade.WriteRequest{
			Mode: facade.Replace, Schema: s.Schema(), Rows: owned(s.All()),
			SourceRefs: []string{sourceTable}, TxnID: in.ID,
		})
	if err != nil {
		return nil, err
	}
	if err := env.Ledger.Commit(ctx, in, ledger.Outcome{
		RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt,
	}); err != nil {
		return nil, err
	}
	out := &e2eResult{
		DatasetID: id, TxnID: in.ID, SnapshotID: res.SnapshotID, Rows: res.Rows,
		DataFiles: len(res.DataFiles), Committed: res.CommittedAt,
	}
	for _, df := range res.DataFiles {
		out.Bytes += df.SizeBytes
	}
	return out, nil
}

// prepareDataset registers the output dataset in the ledger and drops its
// Iceberg table if a previous run left one (its files may live in a
// warehouse that run removed), so every run measures the same write.
func (b *bench) prepareDataset(ctx context.Context) error {
	return b.prepareDatasetID(ctx, datasetID)
}

func (b *bench) prepareDatasetID(ctx context.Context, id string) error {
	if _, err := b.env.Ledger.EnsureDataset(ctx, id, "lakewrite bench output", nil); err != nil {
		return err
	}
	ident, err := b.env.Facade.TableIdentifier(id)
	if err != nil {
		return err
	}
	if err := b.dropTable(ctx, ident); err != nil {
		return fmt.Errorf("drop the previous output table: %w", err)
	}
	return nil
}

// dropTable purges a table left by an earlier run, or forgets its catalog
// entry when its metadata is unreadable (a run on the same database with
// another warehouse).
func (b *bench) dropTable(ctx context.Context, ident table.Identifier) error {
	if err := b.env.Catalog.(catalog.PurgeableTable).PurgeTable(ctx, ident); err == nil || errors.Is(err, catalog.ErrNoSuchTable) ||
		errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil
	}
	if err := b.env.Catalog.DropTable(ctx, ident); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
		return err
	}
	return nil
}

// countingDiscard counts and drops what the Parquet writer writes.
type countingDiscard struct{ n atomic.Int64 }

func (c *countingDiscard) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func codec(name string) (compress.Compression, error) {
	switch strings.ToLower(name) {
	case "", "zstd":
		return compress.Codecs.Zstd, nil
	case "snappy":
		return compress.Codecs.Snappy, nil
	case "uncompressed":
		return compress.Codecs.Uncompressed, nil
	}
	return compress.Codecs.Uncompressed, fmt.Errorf("-compression %q: want zstd, snappy or uncompressed", name)
}

// plainParquet encodes the cursor's batches with pqarrow to a discarding
// writer, with the Parquet settings iceberg-go's writer uses (its defaults
// plus the facade's row group size and codec): the encode without stamping,
// Iceberg metadata or a file system.
func (b *bench) plainParquet(ctx context.Context) (int64, int64, error) {
	s, err := cursor.Batches(ctx, b.env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return 0, 0, err
	}
	cc, _ := codec(b.cfg.Compression)
	rg := b.cfg.RowGroupRows
	if rg == 0 {
		rg = 256 << 10 // facade.Config.RowGroupRows default
	}
	props := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(int64(rg)),
		parquet.WithDataPageSize(1 << 20),
		parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithBatchSize(20000),
		parquet.WithDictionaryPageSizeLimit(2 << 20),
		parquet.WithCompression(cc),
	}
	if b.cfg.CompressionLevel != 0 {
		props = append(props, parquet.WithCompressionLevel(b.cfg.CompressionLevel))
	}
	for _, f := range s.Schema().Fields() {
		props = append(props, parquet.WithDictionaryCostFallbackFor(f.Name, true))
	}
	out := &countingDiscard{}
	w, err := pqarrow.NewFileWriter(s.Schema(), out, parquet.NewWriterProperties(props...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return 0, 0, err
	}
	// Decode and encode run in two goroutines with two batches between
	// them, as in iceberg-go's writer (WriteQueue 2), so the wall time is
	// comparable with the e2e phase.
	queue := make(chan arrow.RecordBatch, 2)
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(queue)
		for rec, err := range s.All() {
			if err != nil {
				done <- err
				return
			}
			select {
			case queue <- rec:
			case <-quit:
				rec.Release()
				done <- nil
				return
			}
		}
		done <- nil
	}()
	var n int64
	var werr error
	for rec := range queue {
		if werr == nil {
			n += rec.NumRows()
			if werr = w.WriteBuffered(rec); werr != nil {
				close(quit)
			}
		}
		rec.Release()
	}
	rerr := <-done
	cerr := w.Close()
	if err := errors.Join(rerr, werr); err != nil {
		return n, 0, err
	}
	if cerr != nil {
		return n, 0, cerr
	}
	return n, out.n.Load(), nil
}

// naiveIceberg is iceberg-go on its own, as a first try would use it:
// the cursor's RecordReader into Transaction.Append of a fresh
// table with iceberg-go's default table properties (zstd at its default
// level, dictionaries tried on every column, a 64-batch queue) and no
// stamping, ledger or bound on memory. A reference point, not a target.
func (b *bench) naiveIceberg(ctx context.Context) (int64, int64, error) {
	ident := table.Identifier{"lakewrite", naiveTable}
	if err := b.dropTable(ctx, ident); err != nil {
		return 0, 0, fmt.Errorf("drop %v: %w", ident, err)
	}
	s, err := cursor.Batches(ctx, b.env.Pool, query, nil, b.cursorOptions())
	if err != nil {
		return 0, 0, err
	}
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(s.Schema(), false)
	if err != nil {
		return 0, 0, err
	}
	// The namespace exists once the e2e phase has run; -only naive creates it.
	if err := b.env.Catalog.CreateNamespace(ctx, ident[:1], nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return 0, 0, err
	}
	tbl, err := b.env.Catalog.CreateTable(ctx, ident, sc)
	if err != nil {
		return 0, 0, err
	}
	rdr := s.RecordReader()
	defer rdr.Release()
	txn := tbl.NewTransaction()
	if err := txn.Append(ctx, rdr, nil); err != nil {
		return 0, 0, err
	}
	tbl, err = txn.Commit(ctx)
	if err != nil {
		return 0, 0, err
	}
	sum := tbl.CurrentSnapshot().Summary.Properties
	rows, _ := strconv.ParseInt(sum["added-records"], 10, 64)
	size, _ := strconv.ParseInt(sum["added-files-size"], 10, 64)
	return rows, size, nil
}
