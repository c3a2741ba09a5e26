package facade

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// CatalogConfig configures a catalog in a Postgres database with a
// warehouse directory or bucket: NewPostgresCatalog (on a pool the caller
// gives) and OpenSQLCatalog (iceberg-go's SQL catalog, through the pgx
// database/sql driver, on a database it connects to).
type CatalogConfig struct {
	// DatabaseURL of the Postgres database holding the catalog tables
	// (iceberg_tables, iceberg_namespace_properties), e.g. the same
	// database as the ledger. OpenSQLCatalog only, where it is required;
	// NewPostgresCatalog uses its pool and rejects it.
	DatabaseURL string
	// Warehouse is the root of the table data: a local directory (made
	// absolute, file:// URL) or an object-store URL such as s3://bucket/path
	// (then pass S3Properties in Props and register the s3 scheme, see doc).
	Warehouse string
	// Name of the catalog (the catalog_name column). Default "lakewrite".
	Name string
	// Props are extra catalog properties (e.g. S3Properties(...)).
	Props iceberg.Properties
}

// SQLCatalog is iceberg-go's SQL catalog with the database handle it
// opened. Close releases both.
type SQLCatalog struct {
	*sqlcat.Catalog
	db *sql.DB
}

// catalogProps returns a catalog's name (default "lakewrite") and its
// properties: extra plus the warehouse, a local directory made an absolute
// file:// URL.
func catalogProps(name, warehouse string, extra iceberg.Properties) (string, iceberg.Properties, error) {
	if name == "" {
		name = "lakewrite"
	}
	if !hasScheme(warehouse) {
		abs, err := filepath.Abs(warehouse)
		if err != nil {
			return "", nil, err
		}
		warehouse = "file://" + filepath.ToSlash(abs)
	}
	props := iceberg.Properties{"warehouse": warehouse}
	maps.Copy(props, extra)
	return name, props, nil
}

// OpenSQLCatalog opens (and initializes, idempotently) the SQL catalog.
func OpenSQLCatalog(ctx context.Context, cfg CatalogConfig) (*SQLCatalog, error) {
	if cfg.DatabaseURL == "" || cfg.Warehouse == "" {
		return nil, errors.New("facade: OpenSQLCatalog needs DatabaseURL and Warehouse")
	}
	name, props, err := catalogProps(cfg.Name, cfg.Warehouse, cfg.Props)
	if err != nil {
		return nil, err
	}
	pc, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("facade: SQL catalog DatabaseURL: %w", err)
	}
	// A connection is checked before each reuse (one round trip): after a
	// Postgres restart the pool's idle connections are dead, and
	// database/sql would hand one out and fail the catalog call with a
	// broken pipe instead of opening a new connection.
	db := stdlib.OpenDB(*pc, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return true }))
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("facade: connect SQL catalog database: %w", err)
	}
	cat, err := sqlcat.NewCatalog(name, db, sqlcat.Postgres, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("facade: open SQL catalog: %w", err)
	}
	return &SQLCatalog{Catalog: cat, db: db}, nil
}

// Close closes the catalog and its database handle.
func (c *SQLCatalog) Close() error {
	return errors.Join(c.Catalog.Close(), c.db.Close())
}

func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ':':
			return i > 1 && i+2 < len(s) && s[i+1] == '/' && s[i+2] == '/'
		case !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
			return false
		}
	}
	return false
}

// OpenRESTCatalog opens a REST catalog (e.g. Lakekeeper, Polaris); opts are
// iceberg-go's rest options, passed through (rest.WithCredential,
// rest.WithOAuthToken, rest.WithWarehouseLocation, rest.WithSigV4, ...).
// It fetches the catalog's configuration (GET /v1/config) at once, so a
// refused credential fails here, with an error matching ErrCatalogAuth.
// The caller closes the catalog.
func OpenRESTCatalog(ctx context.Context, name, uri string, opts ...rest.Option) (*rest.Catalog, error) {
	cat, err := rest.NewCatalog(ctx, name, uri, opts...)
	if err != nil {
		return nil, authError("open REST catalog "+uri, fmt.Errorf("facade: open REST catalog %s: %w", uri, err))
	}
	return cat, nil
}

// S3Config describes S3-compatible object storage (AWS S3, Cloudflare R2,
// MinIO).
type S3Config struct {
	Endpoint        string // e.g. https://<account>.r2.cloudflarestorage.com or http://localhost:9000; empty for AWS
	Region          string // "auto" for R2
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// PathStyle addresses buckets as endpoint/bucket (MinIO, most R2 setups).
	PathStyle bool
}

// S3Properties returns the iceberg-go IO properties for cfg, for
// CatalogConfig.Props or rest.WithAdditionalProps. The s3 scheme is
// registered by importing iceberg-go's gocloud IO:
//
//	import _ "github.com/apache/iceberg-go/io/gocloud/s3"
func S3Properties(cfg S3Config) iceberg.Properties {
	p := iceberg.Properties{
		iceio.S3ForceVirtualAddressing: strconv.FormatBool(!cfg.PathStyle),
	}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set(iceio.S3EndpointURL, cfg.Endpoint)
	set(iceio.S3Region, cfg.Region)
	set(iceio.S3AccessKeyID, cfg.AccessKeyID)
	set(iceio.S3SecretAccessKey, cfg.SecretAccessKey)
	set(iceio.S3SessionToken, cfg.SessionToken)
	return p
}

var _ catalog.Catalog = (*SQLCatalog)(nil)
