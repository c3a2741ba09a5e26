package facade

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Config configures a Facade. The zero value is usable: every zero field
// means the documented default.
type Config struct {
	// namespace holds the tables of the default naming. Default:
	// ["lakewrite"]; set by tests only.
	namespace []string
	// Naming maps a dataset id to a table identifier (namespace..., table).
	// It must return an error wrapping ErrInvalidDatasetID for ids it
	// rejects. Default: the id itself under the namespace "lakewrite",
	// refusing ids CheckDatasetID refuses.
	Naming func(datasetID string) (table.Identifier, error)
	// Allocator for the Arrow memory the facade allocates (stamped columns,
	// scans). Default: memory.DefaultAllocator.
	Allocator memory.Allocator
	// Logger for commit retries and cleanup failures. Default: discard.
	Logger *slog.Logger
	// now is the clock stamped into __created_at (and read by the
	// lifecycle). Default: time.Now; set by tests only.
	now func() time.Time
	// CommitRetries is how many times a clean commit conflict
	// (iceberg-go ErrCommitFailed) is retried against the refreshed table.
	// Default 4; a negative value disables retries. Unknown commit states
	// are never retried.
	CommitRetries int
	// RetryMinWait / RetryMaxWait bound the jittered exponential backoff
	// between commit attempts. Defaults: 50ms and 2s.
	RetryMinWait, RetryMaxWait time.Duration
	// CatalogWait bounds each load (or creation) of a table in the catalog
	// that a write makes before its commit: Stage's, WriteOrder's, Scan's
	// (not the reading of its data files) and FindTxn's. A catalog that has
	// not answered within it (say the catalog of NewPostgresCatalog on a pool with no free
	// connection, all held by the writes running) fails the call with an
	// error matching ErrCatalogTimeout instead of waiting as long as the
	// caller's context. Default 10s.
	CatalogWait time.Duration
	// TargetFileSize rolls data files at about this many bytes. Default 128 MiB.
	TargetFileSize int64
	// RowGroupRows caps the rows per Parquet row group, which bounds the
	// writer's buffered memory. Default 131072.
	RowGroupRows int
	// WriteQueue is the number of stamped batches queued ahead of each
	// Parquet writer (iceberg-go's default is 64). Default 2.
	WriteQueue int
	// WriteWorkers is the number of data files one write encodes in
	// parallel. Rows go to the workers in turns of RowGroupRows, so a write
	// of at most RowGroupRows rows still makes one file. Parquet encoding is
	// most of a write's CPU: when the process has cores to spare (Postgres
	// on another host, batches not read from Postgres), 2 workers wrote
	// ~25% more rows/s in BenchmarkWriteReplace1M on two cores. Each further
	// worker holds its own row group and encoder state (about +30 MiB of heap
	// at the defaults), and with Postgres competing for the same two cores
	// it gained nothing (examples/bench). Default 1.
	WriteWorkers int
	// Compression codec of new tables (write.parquet.compression-codec).
	// Default "zstd".
	Compression string
	// CompressionLevel of new tables (write.parquet.compression-level).
	// Default 1 for zstd: measured by examples/bench, level 1 takes about a
	// fifth less client CPU and ~40 MiB less heap than zstd's default level 3,
	// for files ~18% larger. Negative: the codec's own default.
	CompressionLevel int
	// ScopeIndexBytes is the memory the facade may keep to find the rows
	// of a scoped replace (WriteRequest.Scope over one integer column)
	// without reading the data files that hold them: for each data file a
	// scoped replace read, the key, position and row hash of its rows, 20
	// bytes a row, sorted by key. Data files never change once written, so
	// what is kept never goes stale; the least recently used files are
	// forgotten first. A process whose refreshes recompute a few keys of a
	// large output should keep its output's rows: 20 MiB a million rows.
	// The first scoped replace of a file after the process starts (or
	// after it was forgotten) reads it whole. The same budget keeps, for
	// Changes over integer columns, the requested columns of the data
	// files whose deleted rows it reported (8 bytes a row and column), so
	// that the next read of deletes on a large upstream file is taken
	// from memory. It also keeps the positions each position delete file
	// the facade writes or reads removes (8 bytes a deleted row): a table
	// merged run after run gains delete files until its compaction, and
	// each merge would read them all again. Default 0: nothing is kept,
	// every scoped replace reads the files its keys may be in.
	ScopeIndexBytes int64
	// TableProperties are added to tables the facade creates.
	TableProperties iceberg.Properties
	// ordinalSlots is the largest size of the table that numbers equal
	// rows for __row_id (12 bytes an entry). defaultOrdinalSlots (1<<20)
	// but in tests, which shrink it.
	ordinalSlots int
	// mergeCoWShare, when positive, is the share of the touched files'
	// live rows from which a merge is copy-on-write (see copyOnWrite),
	// for tests (above 1: never); 0, always, takes the measured crossover
	// of the format version (mergeCoWShareV2, mergeCoWShareV3).
	mergeCoWShare float64
	// keyHash, when set, replaces each key hash of a merge (tests: distinct
	// keys sharing a hash).
	keyHash func(uint64) uint64
	// Lifecycle is the table maintenance policy of every dataset (see
	// Lifecycle for its zero-value defaults and Facade.Maintain).
	Lifecycle Lifecycle
	// LifecycleFor, when set, returns the policy of one dataset; ok=false
	// means Lifecycle applies. A returned policy's zero fields take the
	// documented defaults, not Config.Lifecycle's values.
	LifecycleFor func(datasetID string) (policy Lifecycle, ok bool)
	// SchemaPolicy restricts the schema changes of a write (see
	// SchemaPolicy). The zero value allows every change.
	SchemaPolicy SchemaPolicy
	// SchemaPolicyFor, when set, returns the policy of one dataset; ok=false
	// means SchemaPolicy applies. It is called for each write.
	SchemaPolicyFor func(datasetID string) (policy SchemaPolicy, ok bool)
	// PartitionFor, when set, returns the partitioning of one dataset's
	// table; ok=false means undeclared (a new table is unpartitioned, an
	// existing one keeps its layout). It is applied when the facade creates
	// the table and evolves it when changed (see Partitioning); a
	// partitioned write requires its rows clustered by partition.
	PartitionFor func(datasetID string) (p Partitioning, ok bool)
	// FormatVersionFor, when set, returns the Iceberg format version of one
	// dataset's table: 2, the default, or 3 (merges write deletion vectors,
	// rows carry Iceberg row lineage; see "Format versions" in the package
	// documentation for which engines read what). ok=false means undeclared:
	// a new table is v2, an existing one keeps its version. A new table is
	// created at the declared version; an existing v2 table is upgraded to
	// v3 in the commit of its next write. A table is never downgraded.
	FormatVersionFor func(datasetID string) (version int, ok bool)
}

// schemaPolicy returns the schema policy of a dataset.
func (f *Facade) schemaPolicy(datasetID string) SchemaPolicy {
	if f.s.SchemaPolicyFor != nil {
		if p, ok := f.s.SchemaPolicyFor(datasetID); ok {
			return p
		}
	}
	return f.s.SchemaPolicy
}

type settings struct {
	Config
}

func (c *Config) settings() (settings, error) {
	var s settings
	if c != nil {
		s.Config = *c
	}
	if len(s.namespace) == 0 {
		s.namespace = []string{"lakewrite"}
	}
	if s.Naming == nil {
		s.Naming = defaultNaming(s.namespace)
	}
	if s.Allocator == nil {
		s.Allocator = memory.DefaultAllocator
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	switch {
	case s.CommitRetries == 0:
		s.CommitRetries = 4
	case s.CommitRetries < 0:
		s.CommitRetries = 0
	}
	if s.RetryMinWait <= 0 {
		s.RetryMinWait = 50 * time.Millisecond
	}
	if s.RetryMaxWait <= 0 {
		s.RetryMaxWait = 2 * time.Second
	}
	if s.CatalogWait <= 0 {
		s.CatalogWait = 10 * time.Second
	}
	if s.RetryMinWait > s.RetryMaxWait {
		return s, fmt.Errorf("facade: Config.RetryMinWait (%v) exceeds RetryMaxWait (%v): lower the first or raise the second", s.RetryMinWait, s.RetryMaxWait)
	}
	if s.TargetFileSize <= 0 {
		s.TargetFileSize = 128 << 20
	}
	if s.RowGroupRows <= 0 {
		s.RowGroupRows = 128 << 10
	}
	if s.WriteQueue <= 0 {
		s.WriteQueue = 2
	}
	if s.WriteWorkers <= 0 {
		s.WriteWorkers = 1
	}
	if s.Compression == "" {
		s.Compression = "zstd"
	}
	if s.CompressionLevel == 0 && s.Compression == "zstd" {
		s.CompressionLevel = 1
	}
	if s.ordinalSlots <= 0 {
		s.ordinalSlots = defaultOrdinalSlots
	}
	return s, nil
}

// defaultNaming maps dataset id "d" to table (namespace..., "d"), rejecting
// ids that CheckDatasetID rejects with ErrInvalidDatasetID.
func defaultNaming(namespace []string) func(string) (table.Identifier, error) {
	ns := append([]string(nil), namespace...)
	return func(id string) (table.Identifier, error) {
		if CheckDatasetID(id) != nil {
			return nil, fmt.Errorf("%w: %q (want %s)", ErrInvalidDatasetID, id, vocab.DatasetIDRule)
		}
		return append(append(table.Identifier{}, ns...), id), nil
	}
}
