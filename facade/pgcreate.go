package facade

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
)

// A new table on a postgresCatalog is created by the first commit that
// writes it: Stage writes the data files against the table CreateTable
// would create (pendingTable), and the commit registers the table with
// that first snapshot (createTableTx), in the caller's transaction when
// there is one. A write committed by Commit or CommitTx that fails or
// rolls back leaves no table behind, and the table's first metadata file
// is the one of its first snapshot. CommitAll registers the new tables
// (empty) before its multi-table transaction, so a CommitAll that fails
// may leave empty tables (never rows).

// pendingTable returns the table CreateTable would create, with nothing
// written or registered; its metadata location is empty. probe, when not
// nil, is its namespace as just read (loadOrProbe).
func (c *postgresCatalog) pendingTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, probe *namespaceProbe, opts ...catalog.CreateTableOpt) (*table.Table, string, error) {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return nil, "", err
	}
	nsKey, meta, err := c.newTableMetadata(ctx, ident, sc, probe, opts...)
	if err != nil {
		return nil, "", err
	}
	return table.New(ident, meta, "", iceio.LoadFSFunc(c.props, meta.Location()), c), nsKey, nil
}

// createTableTx creates table ident in tx with the metadata base (from
// pendingTable) after checking reqs against it and applying updates: the
// table's first metadata file holds its first commit. A table that exists
// meanwhile is a clean conflict (table.ErrCommitFailed). The row is
// inserted by one statement that also checks the namespace (insertTable):
// the metadata file is written before it and removed when it fails.
func (c *postgresCatalog) createTableTx(ctx context.Context, tx pgx.Tx, ident table.Identifier, base table.Metadata, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return nil, "", err
	}
	nsKey, err := c.namespaceKey(ctx, tx, catalog.NamespaceFromIdent(ident))
	if errors.Is(err, catalog.ErrNoSuchNamespace) {
		// tx may read an older snapshot (REPEATABLE READ) than the
		// namespace's creation by the write that needed it
		nsKey, err = c.namespaceKey(ctx, c.db, catalog.NamespaceFromIdent(ident))
	}
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(base); err != nil {
			return nil, "", err
		}
	}
	updated, err := table.UpdateTableMetadata(base, updates, "")
	if err != nil {
		return nil, "", err
	}
	provider, err := table.LoadLocationProvider(updated.Location(), updated.Properties())
	if err != nil {
		return nil, "", err
	}
	loc, err := provider.NewTableMetadataFileLocation(0)
	if err != nil {
		return nil, "", err
	}
	if err := c.writeMetadata(ctx, updated, loc); err != nil {
		return nil, "", err
	}
	if err := c.insertTable(ctx, tx, nsKey, catalog.TableNameFromIdent(ident), loc, ident); err != nil {
		c.removeFile(loc)
		if errors.Is(err, catalog.ErrTableAlreadyExists) {
			err = fmt.Errorf("%w: %w", table.ErrCommitFailed, err)
		}
		return nil, "", err
	}
	c.metas.put(loc, updated)
	return updated, loc, nil
}

// creatingCatalog commits the first snapshot of a pending table: its
// CommitTable creates the table (in tx, or in a transaction of its own).
type creatingCatalog struct {
	catalog.Catalog
	pc   *postgresCatalog
	tx   pgx.Tx
	base table.Metadata
}

func (c creatingCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if c.tx != nil {
		return c.pc.createTableTx(ctx, c.tx, ident, c.base, reqs, updates)
	}
	tx, err := c.pc.db.Begin(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("facade: catalog create %s: %w", strings.Join(ident, "."), err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	meta, loc, err := c.pc.createTableTx(ctx, tx, ident, c.base, reqs, updates)
	if err != nil {
		return nil, "", err
	}
	if err := tx.Commit(ctx); err != nil {
		// not ErrCommitFailed: the outcome is unknown
		return nil, "", fmt.Errorf("facade: catalog create %s: %w", strings.Join(ident, "."), err)
	}
	return meta, loc, nil
}

// createPending registers the pending table of s as CreateTable would
// have (a table created meanwhile with the same schema and partition spec
// is used instead), so that s commits onto an existing table. existed
// reports that the table was created meanwhile: it may already hold
// snapshots, so s must be refreshed (refreshForRetry) before it commits.
func (f *Facade) createPending(ctx context.Context, s *icebergStaged) (existed bool, err error) {
	if s.create == nil {
		return false, nil
	}
	tbl, err := s.create.registerTable(ctx, s.ident, s.createNS, s.base.Metadata())
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		existed = true
		if tbl, err = f.load(ctx, s.target.DatasetID, s.ident); err == nil && !samePendingLayout(s.base, tbl) {
			err = fmt.Errorf("%w: %q: table created concurrently with another schema or partition spec", ErrCommitConflict, s.target.DatasetID)
		}
	}
	if err != nil {
		return existed, authError("create table "+strings.Join(s.ident, "."), fmt.Errorf("facade: create table %s: %w", strings.Join(s.ident, "."), err))
	}
	s.base, s.create = tbl, nil
	return existed, nil
}

// samePendingLayout reports whether the data files written for the
// pending table pending fit the table tbl created meanwhile.
func samePendingLayout(pending, tbl *table.Table) bool {
	return tbl.Schema().Equals(pending.Schema()) && tbl.Spec().Equals(pending.Spec()) && tbl.Schema().ID == pending.Schema().ID
}
