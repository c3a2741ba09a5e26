package facade

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
)

// CommitTable applies updates to the table after checking reqs, in a
// transaction of its own. A failure of the final COMMIT leaves the outcome
// unknown (the error is not table.ErrCommitFailed).
func (c *postgresCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	tx, err := c.db.Begin(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("facade: catalog commit %s: %w", strings.Join(ident, "."), err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	meta, loc, err := c.CommitTableTx(ctx, tx, ident, reqs, updates)
	if err != nil {
		return nil, "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, "", fmt.Errorf("facade: catalog commit %s: %w", strings.Join(ident, "."), err)
	}
	return meta, loc, nil
}

// CommitTransaction commits changes to several tables in one Postgres
// transaction (catalog.TransactionalCatalog): every table's requirements
// are checked and every pointer swapped, or nothing is. With it a Facade on
// this catalog reports SupportsAtomicCommit and CommitAll works.
func (c *postgresCatalog) CommitTransaction(ctx context.Context, commits []table.TableCommit) error {
	tx, err := c.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("facade: catalog commit transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	for _, tc := range commits {
		if _, _, err := c.CommitTableTx(ctx, tx, tc.Identifier, tc.Requirements, tc.Updates); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("facade: catalog commit transaction: %w", err)
	}
	return nil
}

// CommitTableTx applies updates to the table after checking reqs, inside
// tx (see txCatalog). It locks the table's row until tx ends, checks the
// requirements against the metadata the row points to, writes the new
// metadata file and swaps the pointer (UPDATE ... WHERE metadata_location
// = previous). A table without a row is created (no requirement may then
// assume a table).
func (c *postgresCatalog) CommitTableTx(ctx context.Context, tx pgx.Tx, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	nsKey, curLoc, err := c.metadataLocation(ctx, tx, ident, true)
	if err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, "", err
	}
	if curLoc != "" {
		cur, err := c.tableAt(ctx, ident, curLoc)
		if err != nil {
			return nil, "", err
		}
		// Under the row lock the swap cannot miss, unless the row went away.
		return c.swapAt(ctx, tx, ident, nsKey, curLoc, cur.Metadata(), reqs, updates)
	}
	base, err := table.NewMetadata(iceberg.NewSchema(0), nil, table.UnsortedSortOrder, "", nil)
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(nil); err != nil {
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
	newLoc, err := provider.NewTableMetadataFileLocation(0)
	if err != nil {
		return nil, "", err
	}
	if err := c.writeMetadata(ctx, updated, newLoc); err != nil {
		return nil, "", err
	}
	c.metas.put(newLoc, updated)
	if err := c.insertTable(ctx, tx, nsKey, catalog.TableNameFromIdent(ident), newLoc, ident); err != nil {
		c.removeFile(newLoc)
		return nil, "", err
	}
	return updated, newLoc, nil
}

// commitAt commits updates to table ident whose metadata pointer the
// caller read as loc (with metadata base), in tx or, when tx is nil, in
// one statement of its own: the requirements are checked against base,
// the new metadata file is written, and the pointer swapped only while it
// is still loc (UPDATE ... WHERE metadata_location = loc). This is
// CommitTableTx's compare-and-swap without reading the pointer first: a
// pointer that moved meanwhile is a clean conflict (table.ErrCommitFailed,
// tx staying usable) and the new metadata file is removed.
func (c *postgresCatalog) commitAt(ctx context.Context, tx pgx.Tx, ident table.Identifier, loc string, base table.Metadata, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return nil, "", err
	}
	var q querier = c.db
	if tx != nil {
		q = tx
	}
	nsKey, err := c.namespaceKey(ctx, q, catalog.NamespaceFromIdent(ident))
	if err != nil {
		return nil, "", err
	}
	return c.swapAt(ctx, q, ident, nsKey, loc, base, reqs, updates)
}

// swapAt is commitAt once the table's namespace key is known (in q: a
// transaction or the pool).
func (c *postgresCatalog) swapAt(ctx context.Context, q querier, ident table.Identifier, nsKey, loc string, base table.Metadata, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	version := parseMetadataVersion(loc)
	if version < 0 {
		return nil, "", fmt.Errorf("facade: catalog commit %s: invalid metadata location %s", strings.Join(ident, "."), loc)
	}
	for _, r := range reqs {
		if err := r.Validate(base); err != nil {
			return nil, "", err
		}
	}
	updated, err := table.UpdateTableMetadata(base, updates, loc)
	if err != nil {
		return nil, "", err
	}
	if updated.Equals(base) {
		return base, loc, nil
	}
	provider, err := table.LoadLocationProvider(updated.Location(), updated.Properties())
	if err != nil {
		return nil, "", err
	}
	newLoc, err := provider.NewTableMetadataFileLocation(version + 1)
	if err != nil {
		return nil, "", err
	}
	if err := c.writeMetadata(ctx, updated, newLoc); err != nil {
		return nil, "", err
	}
	sql := `UPDATE iceberg_tables SET metadata_location = $4, previous_metadata_location = $5, iceberg_type = 'TABLE'
		WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 AND metadata_location = $5` + c.typeFilter()
	if c.v0 {
		sql = `UPDATE iceberg_tables SET metadata_location = $4, previous_metadata_location = $5
		WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 AND metadata_location = $5`
	}
	tag, err := q.Exec(ctx, sql, c.name, nsKey, catalog.TableNameFromIdent(ident), newLoc, loc)
	if err != nil {
		// the outcome of a statement of its own is unknown: the file stays
		return nil, "", fmt.Errorf("facade: catalog commit %s: %w", strings.Join(ident, "."), err)
	}
	if tag.RowsAffected() == 0 {
		c.removeFile(newLoc)
		return nil, "", fmt.Errorf("%w: table %s metadata-location moved underneath us", table.ErrCommitFailed, strings.Join(ident, "."))
	}
	c.metas.put(newLoc, updated)
	return updated, newLoc, nil
}

// swappingCatalog commits onto a loaded table of a postgresCatalog with
// commitAt (in tx when not nil): the pointer the table was loaded from is
// the one swapped.
type swappingCatalog struct {
	catalog.Catalog
	pc   *postgresCatalog
	tx   pgx.Tx
	loc  string
	base table.Metadata
}

func (c swappingCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	return c.pc.commitAt(ctx, c.tx, ident, c.loc, c.base, reqs, updates)
}
