package facade

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/klauspost/compress/zstd"
)

// txCatalog is a catalog that can commit a table change inside a caller's
// Postgres transaction: the pointer swap then commits, or rolls back, with
// whatever else the transaction writes (the ledger commit). The facade
// finds the ability by type assertion; postgresCatalog has it.
type txCatalog interface {
	catalog.Catalog
	// CommitTableTx is CommitTable inside tx: it writes the new metadata
	// file, then swaps the table's metadata pointer in tx. Nothing is
	// visible until the caller commits tx; after an error the caller must
	// roll tx back. A moved table is a clean conflict (table.ErrCommitFailed
	// or a failed requirement), tx staying usable.
	CommitTableTx(ctx context.Context, tx pgx.Tx, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error)
}

// postgresCatalog is the catalog NewPostgresCatalog returns.
type postgresCatalog struct {
	db    *pgxpool.Pool
	name  string
	props iceberg.Properties
	v0    bool // legacy layout without iceberg_type
	// metas holds the metadata of recently read or written metadata
	// files by location: a metadata file never changes once written, so
	// a load finding the same location skips reading and parsing it.
	metas metaCache
}

// metaCacheSize bounds the metadata files a postgresCatalog keeps parsed.
const metaCacheSize = 16

// metaCache is a small FIFO cache of parsed table metadata by location.
type metaCache struct {
	mu    sync.Mutex
	byLoc map[string]table.Metadata
	order []string
}

func (m *metaCache) get(loc string) table.Metadata {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byLoc[loc]
}

func (m *metaCache) put(loc string, meta table.Metadata) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byLoc == nil {
		m.byLoc = map[string]table.Metadata{}
	}
	if _, ok := m.byLoc[loc]; ok {
		return
	}
	if len(m.order) >= metaCacheSize {
		delete(m.byLoc, m.order[0])
		m.order = m.order[1:]
	}
	m.byLoc[loc] = meta
	m.order = append(m.order, loc)
}

var (
	_ catalog.Catalog              = (*postgresCatalog)(nil)
	_ catalog.PurgeableTable       = (*postgresCatalog)(nil)
	_ catalog.TransactionalCatalog = (*postgresCatalog)(nil)
	_ txCatalog                    = (*postgresCatalog)(nil)
)

const (
	pgcatTableType           = "TABLE"
	pgcatNamespaceExistsProp = "exists"
	pgcatEncodedNSPrefix     = "__iceberg_namespace_v1__:"
)

// pgcatDDL creates the catalog tables as iceberg-go's SQL catalog does.
const pgcatDDL = `
CREATE TABLE IF NOT EXISTS iceberg_tables (
	catalog_name VARCHAR NOT NULL,
	table_namespace VARCHAR NOT NULL,
	table_name VARCHAR NOT NULL,
	iceberg_type VARCHAR,
	metadata_location VARCHAR,
	previous_metadata_location VARCHAR,
	PRIMARY KEY (catalog_name, table_namespace, table_name));
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
	catalog_name VARCHAR NOT NULL,
	namespace VARCHAR NOT NULL,
	property_key VARCHAR NOT NULL,
	property_value VARCHAR,
	PRIMARY KEY (catalog_name, namespace, property_key))`

// NewPostgresCatalog returns an Iceberg catalog kept in Postgres through
// pgx, on a pool the caller owns (the ledger's) and the catalog never
// closes, creating its two tables when they do not exist (idempotent, safe
// to run concurrently). cfg.Warehouse is required; cfg.DatabaseURL must be
// empty (the catalog uses pool).
//
// It keeps the tables of iceberg-go's SQL catalog, the Java JDBC catalog
// and pyiceberg's SqlCatalog (iceberg_tables and
// iceberg_namespace_properties in the connection's current schema, scoped
// by catalog_name, namespaces encoded the same way), so those catalogs,
// configured with the same name and database, read and write the same
// tables. A commit is the same optimistic compare-and-swap of
// metadata_location; a lost race is table.ErrCommitFailed. The catalog
// also implements catalog.PurgeableTable and catalog.TransactionalCatalog
// (several tables in one Postgres transaction).
//
// Unlike iceberg-go's SQL catalog it can commit inside a caller's
// transaction: a Facade on it stages TxStaged writes, which lets a writer
// commit the snapshot and its own bookkeeping atomically. Views are not
// supported (rows of type VIEW are ignored).
func NewPostgresCatalog(ctx context.Context, pool *pgxpool.Pool, cfg CatalogConfig) (catalog.Catalog, error) {
	if pool == nil || cfg.Warehouse == "" {
		return nil, errors.New("facade: NewPostgresCatalog needs a pool and a Warehouse")
	}
	if cfg.DatabaseURL != "" {
		return nil, errors.New("facade: NewPostgresCatalog uses the pool it is given: CatalogConfig.DatabaseURL must be empty")
	}
	name, props, err := catalogProps(cfg.Name, cfg.Warehouse, cfg.Props)
	if err != nil {
		return nil, err
	}
	c := &postgresCatalog{db: pool, name: name, props: props}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Concurrent CREATE TABLE IF NOT EXISTS can still collide.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('lakewrite.iceberg-catalog-ddl', 0))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, pgcatDDL); err != nil {
			return err
		}
		var hasType bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'iceberg_tables' AND column_name = 'iceberg_type')`).Scan(&hasType); err != nil {
			return err
		}
		c.v0 = !hasType
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("facade: initialize Postgres catalog: %w", err)
	}
	return c, nil
}

// CatalogType is catalog.SQL: the catalog keeps the SQL catalog's tables.
func (c *postgresCatalog) CatalogType() catalog.Type { return catalog.SQL }

// typeFilter scopes a query on iceberg_tables to tables.
func (c *postgresCatalog) typeFilter() string {
	if c.v0 {
		return ""
	}
	return ` AND (iceberg_type = '` + pgcatTableType + `' OR iceberg_type IS NULL)`
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// metadataLocation reads a table's metadata pointer; forUpdate locks the
// row for the rest of the transaction.
func (c *postgresCatalog) metadataLocation(ctx context.Context, q querier, ident table.Identifier, forUpdate bool) (nsKey, loc string, err error) {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return "", "", err
	}
	if nsKey, err = c.namespaceKey(ctx, q, catalog.NamespaceFromIdent(ident)); err != nil {
		return "", "", err
	}
	sql := `SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3` + c.typeFilter()
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	var ml *string
	err = q.QueryRow(ctx, sql, c.name, nsKey, catalog.TableNameFromIdent(ident)).Scan(&ml)
	if errors.Is(err, pgx.ErrNoRows) {
		return nsKey, "", fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(ident, "."))
	}
	if err != nil {
		return "", "", fmt.Errorf("facade: catalog load %s: %w", strings.Join(ident, "."), err)
	}
	if ml == nil {
		return nsKey, "", fmt.Errorf("%w: %s, metadata location is missing", catalog.ErrNoSuchTable, strings.Join(ident, "."))
	}
	return nsKey, *ml, nil
}

func (c *postgresCatalog) tableAt(ctx context.Context, ident table.Identifier, loc string) (*table.Table, error) {
	fsF := iceio.LoadFSFunc(c.props, loc)
	if meta := c.metas.get(loc); meta != nil {
		return table.New(ident, meta, loc, fsF, c), nil
	}
	tbl, err := table.NewFromLocation(ctx, ident, loc, fsF, c)
	if err != nil {
		return nil, err
	}
	c.metas.put(loc, tbl.Metadata())
	return tbl, nil
}

// LoadTable loads a table.
func (c *postgresCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	return c.loadTable(ctx, c.db, ident)
}

func (c *postgresCatalog) loadTable(ctx context.Context, q querier, ident table.Identifier) (*table.Table, error) {
	_, loc, err := c.metadataLocation(ctx, q, ident, false)
	if err != nil {
		return nil, err
	}
	return c.tableAt(ctx, ident, loc)
}

// CheckTableExists reports whether the table has a row in the catalog.
func (c *postgresCatalog) CheckTableExists(ctx context.Context, ident table.Identifier) (bool, error) {
	_, _, err := c.metadataLocation(ctx, c.db, ident, false)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return false, nil
	}
	return err == nil, err
}

// CreateTable writes the first metadata file of a new table and registers
// it.
func (c *postgresCatalog) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...catalog.CreateTableOpt) (*table.Table, error) {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return nil, err
	}
	nsKey, meta, err := c.newTableMetadata(ctx, ident, sc, nil, opts...)
	if err != nil {
		return nil, err
	}
	return c.registerTable(ctx, ident, nsKey, meta)
}

// registerTable writes meta as the first metadata file of table ident and
// registers it.
func (c *postgresCatalog) registerTable(ctx context.Context, ident table.Identifier, nsKey string, meta table.Metadata) (*table.Table, error) {
	name := catalog.TableNameFromIdent(ident)
	provider, err := table.LoadLocationProvider(meta.Location(), meta.Properties())
	if err != nil {
		return nil, err
	}
	metaLoc, err := provider.NewTableMetadataFileLocation(0)
	if err != nil {
		return nil, err
	}
	if err := c.writeMetadata(ctx, meta, metaLoc); err != nil {
		return nil, err
	}
	if err := c.insertTable(ctx, c.db, nsKey, name, metaLoc, ident); err != nil {
		c.removeFile(metaLoc)
		return nil, err
	}
	c.metas.put(metaLoc, meta)
	return table.New(ident, meta, metaLoc, iceio.LoadFSFunc(c.props, metaLoc), c), nil
}

// namespaceProbe is what a new table needs of its namespace: its stored
// key, whether it exists and its properties.
type namespaceProbe struct {
	key    string
	exists bool
	props  iceberg.Properties
}

// loadOrProbe loads table ident, or, when it has no row, returns its
// namespace as newTableMetadata needs it, in one statement (the table's
// metadata pointer, the namespace's properties and whether it holds
// tables). With an ambiguous namespace encoding it returns neither and
// the caller takes the general path.
func (c *postgresCatalog) loadOrProbe(ctx context.Context, ident table.Identifier) (*table.Table, *namespaceProbe, error) {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return nil, nil, err
	}
	keys := namespaceStorageKeys(catalog.NamespaceFromIdent(ident))
	if len(keys) != 1 {
		tbl, err := c.LoadTable(ctx, ident)
		return tbl, nil, err
	}
	rows, err := c.db.Query(ctx, `SELECT 0, metadata_location, NULL::pg_catalog.varchar FROM iceberg_tables
			WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3`+c.typeFilter()+`
		UNION ALL SELECT 1, property_key, coalesce(property_value, '') FROM iceberg_namespace_properties
			WHERE catalog_name = $1 AND namespace = $2
		UNION ALL SELECT 2, NULL, NULL WHERE EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2)`,
		c.name, keys[0], catalog.TableNameFromIdent(ident))
	if err != nil {
		return nil, nil, fmt.Errorf("facade: catalog load %s: %w", strings.Join(ident, "."), err)
	}
	var (
		kind     int
		a, b     *string
		found    bool
		loc      *string
		nsExists bool
		props    = iceberg.Properties{}
	)
	if _, err := pgx.ForEachRow(rows, []any{&kind, &a, &b}, func() error {
		switch kind {
		case 0:
			found, loc = true, a
		case 1:
			nsExists = true
			if a != nil && *a != pgcatNamespaceExistsProp && b != nil {
				props[*a] = *b
			}
		default:
			nsExists = true
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("facade: catalog load %s: %w", strings.Join(ident, "."), err)
	}
	if found && loc != nil {
		tbl, err := c.tableAt(ctx, ident, *loc)
		return tbl, nil, err
	}
	probe := &namespaceProbe{key: keys[0], exists: nsExists, props: props}
	if found {
		return nil, probe, fmt.Errorf("%w: %s, metadata location is missing", catalog.ErrNoSuchTable, strings.Join(ident, "."))
	}
	return nil, probe, fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(ident, "."))
}

// newTableMetadata returns the namespace key and the first metadata of a
// new table, as CreateTable writes it. probe, when not nil, is the
// namespace as just read (loadOrProbe).
func (c *postgresCatalog) newTableMetadata(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, probe *namespaceProbe, opts ...catalog.CreateTableOpt) (string, table.Metadata, error) {
	cfg := catalog.NewCreateTableCfg()
	for _, o := range opts {
		o(&cfg)
	}
	name := catalog.TableNameFromIdent(ident)
	var (
		nsKey   string
		nsProps iceberg.Properties
		ok      bool
		err     error
	)
	if probe != nil {
		nsKey, nsProps, ok = probe.key, probe.props, probe.exists
	} else if nsKey, nsProps, ok, err = c.namespaceWithProps(ctx, c.db, catalog.NamespaceFromIdent(ident)); err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, nsKey)
	}
	loc := strings.TrimSuffix(cfg.Location, "/")
	if loc == "" {
		if l := nsProps.Get("location", ""); l != "" {
			loc, err = url.JoinPath(l, name)
		} else {
			loc, err = url.JoinPath(c.props.Get("warehouse", ""), nsKey+".db", name)
		}
		if err != nil {
			return "", nil, err
		}
	}
	meta, err := table.NewMetadata(sc, cfg.PartitionSpec, cfg.SortOrder, loc, cfg.Properties)
	if err != nil {
		return "", nil, err
	}
	return nsKey, meta, nil
}

// insertTable registers a table row in the namespace stored as nsKey, in
// one statement that inserts only while the namespace exists: an existing
// row is catalog.ErrTableAlreadyExists, a missing namespace
// catalog.ErrNoSuchNamespace.
func (c *postgresCatalog) insertTable(ctx context.Context, q querier, nsKey, name, metaLoc string, ident table.Identifier) error {
	cols, typ := `catalog_name, table_namespace, table_name, metadata_location, iceberg_type`, `, 'TABLE'`
	if c.v0 {
		cols, typ = `catalog_name, table_namespace, table_name, metadata_location`, ``
	}
	tag, err := q.Exec(ctx, `INSERT INTO iceberg_tables (`+cols+`) SELECT $1::pg_catalog.varchar, $2::pg_catalog.varchar, $3::pg_catalog.varchar, $4::pg_catalog.varchar`+typ+`
		WHERE EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2)
		OR EXISTS (SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2)
		ON CONFLICT DO NOTHING`, c.name, nsKey, name, metaLoc)
	if err != nil {
		return fmt.Errorf("facade: catalog create table %s: %w", strings.Join(ident, "."), err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	// Nothing inserted: the row exists, or the namespace does not.
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3)`,
		c.name, nsKey, name).Scan(&exists); err != nil {
		return fmt.Errorf("facade: catalog create table %s: %w", strings.Join(ident, "."), err)
	}
	if exists {
		return fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(ident, "."))
	}
	if q != querier(c.db) {
		// q, a transaction, may read a snapshot older than the namespace
		// (REPEATABLE READ, the namespace created meanwhile by the write
		// that needed it): ask the database as of now.
		var ns bool
		if err := c.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2)
			OR EXISTS (SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2)`, c.name, nsKey).Scan(&ns); err != nil {
			return fmt.Errorf("facade: catalog create table %s: %w", strings.Join(ident, "."), err)
		}
		if ns {
			tag, err := q.Exec(ctx, `INSERT INTO iceberg_tables (`+cols+`) VALUES ($1, $2, $3, $4`+typ+`) ON CONFLICT DO NOTHING`, c.name, nsKey, name, metaLoc)
			if err != nil {
				return fmt.Errorf("facade: catalog create table %s: %w", strings.Join(ident, "."), err)
			}
			if tag.RowsAffected() > 0 {
				return nil
			}
			return fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(ident, "."))
		}
	}
	return fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, nsKey)
}

// writeMetadata writes meta to loc with the table's metadata compression.
func (c *postgresCatalog) writeMetadata(ctx context.Context, meta table.Metadata, loc string) (err error) {
	ioProps := maps.Clone(c.props)
	maps.Copy(ioProps, meta.Properties())
	fs, err := iceio.LoadFSFunc(ioProps, loc)(ctx)
	if err != nil {
		return err
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return errors.New("facade: catalog file IO does not support writing")
	}
	codec := meta.Properties().Get(table.MetadataCompressionKey, table.MetadataCompressionDefault)
	out, err := wfs.Create(loc)
	if err != nil {
		return fmt.Errorf("facade: write table metadata %s: %w", loc, err)
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	var w io.Writer = out
	switch codec {
	case table.MetadataCompressionCodecNone:
	case table.MetadataCompressionCodecGzip:
		gz := gzip.NewWriter(out)
		defer func() { err = errors.Join(err, gz.Close()) }()
		w = gz
	case table.MetadataCompressionCodecZstd:
		zw, zerr := zstd.NewWriter(out)
		if zerr != nil {
			return zerr
		}
		defer func() { err = errors.Join(err, zw.Close()) }()
		w = zw
	default:
		return fmt.Errorf("facade: unsupported metadata compression codec %q", codec)
	}
	return json.NewEncoder(w).Encode(meta)
}

func (c *postgresCatalog) removeFile(loc string) {
	fs, err := iceio.LoadFSFunc(c.props, loc)(context.Background())
	if err == nil {
		_ = fs.Remove(loc)
	}
}

var (
	pgcatMetadataFileRE       = regexp.MustCompile(`^(\d+)-([\w-]{36})(?:\.\w+)?\.metadata\.json$`)
	pgcatLegacyMetadataFileRE = regexp.MustCompile(`^v(\d+)(?:\.gz)?\.metadata\.json$`)
)

// parseMetadataVersion is the version number in a metadata file name, or
// -1.
func parseMetadataVersion(loc string) int {
	if strings.HasSuffix(loc, "/") {
		return -1
	}
	name := path.Base(loc)
	m := pgcatMetadataFileRE.FindStringSubmatch(name)
	if len(m) == 3 {
		if _, err := uuid.Parse(m[2]); err != nil {
			return -1
		}
	} else if m = pgcatLegacyMetadataFileRE.FindStringSubmatch(name); len(m) != 2 {
		return -1
	}
	v, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return v
}

// DropTable removes the table's row (its files stay).
func (c *postgresCatalog) DropTable(ctx context.Context, ident table.Identifier) error {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return err
	}
	nsKey, err := c.namespaceKey(ctx, c.db, catalog.NamespaceFromIdent(ident))
	if err != nil {
		return err
	}
	tag, err := c.db.Exec(ctx, `DELETE FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3`+c.typeFilter(),
		c.name, nsKey, catalog.TableNameFromIdent(ident))
	if err != nil {
		return fmt.Errorf("facade: catalog drop table %s: %w", strings.Join(ident, "."), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(ident, "."))
	}
	return nil
}

// PurgeTable drops the table and then deletes its files (best effort,
// skipped when the table's gc.enabled is false).
func (c *postgresCatalog) PurgeTable(ctx context.Context, ident table.Identifier) error {
	tbl, err := c.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	if err := c.DropTable(ctx, ident); err != nil {
		return err
	}
	_ = tbl.PurgeFiles(ctx) // the catalog row is the truth: the table is gone
	return nil
}

// RenameTable moves a table to another identifier (its namespace must
// exist) and loads it.
func (c *postgresCatalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	if err := catalog.ValidateTableIdentifier(from); err != nil {
		return nil, err
	}
	if err := catalog.ValidateTableIdentifier(to); err != nil {
		return nil, err
	}
	err := pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		fromNS, _, err := c.metadataLocation(ctx, tx, from, true)
		if err != nil {
			return err
		}
		toNS, ok, err := c.resolveNamespace(ctx, tx, catalog.NamespaceFromIdent(to))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, toNS)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3)`,
			c.name, toNS, catalog.TableNameFromIdent(to)).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(to, "."))
		}
		_, err = tx.Exec(ctx, `UPDATE iceberg_tables SET table_namespace = $4, table_name = $5
			WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3`,
			c.name, fromNS, catalog.TableNameFromIdent(from), toNS, catalog.TableNameFromIdent(to))
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.LoadTable(ctx, to)
}

// ListTables lists the tables of a namespace.
func (c *postgresCatalog) ListTables(ctx context.Context, namespace table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		ids, err := c.listTables(ctx, namespace)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, id := range ids {
			if !yield(id, nil) {
				return
			}
		}
	}
}

func (c *postgresCatalog) listTables(ctx context.Context, namespace table.Identifier) ([]table.Identifier, error) {
	ns := namespaceToString(namespace)
	if len(namespace) > 0 {
		var ok bool
		var err error
		if ns, ok, err = c.resolveNamespace(ctx, c.db, namespace); err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, strings.Join(namespace, "."))
		}
	}
	rows, err := c.db.Query(ctx, `SELECT table_namespace, table_name FROM iceberg_tables
		WHERE catalog_name = $1 AND table_namespace = $2`+c.typeFilter()+` ORDER BY table_name`, c.name, ns)
	if err != nil {
		return nil, fmt.Errorf("facade: catalog list tables: %w", err)
	}
	var out []table.Identifier
	var tns, tname string
	_, err = pgx.ForEachRow(rows, []any{&tns, &tname}, func() error {
		out = append(out, append(namespaceFromString(tns), tname))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("facade: catalog list tables: %w", err)
	}
	return out, nil
}
