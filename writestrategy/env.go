package writestrategy

import (
	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/incremental/model"

	"github.com/lakewrite/lakewrite/ledger"
)

// defaultMaxCrossJoinRows is the cross-join preflight's default limit.
const defaultMaxCrossJoinRows = 10_000_000

// Env is what Apply and ComputeRows need besides the transaction. Called
// directly, they read every source whole and apply the default cross-join
// limit (10,000,000 rows); the Dispatcher also passes the write's delta
// windows (Request.Delta), source filters (Request.SourceFilter), ledger
// transaction ids, the cross-join limit (DispatchConfig.MaxCrossJoinRows)
// and the row order a partitioned Iceberg output requires.
type Env struct {
	// Schema is the control-plane schema. Default "lakewrite".
	Schema string
	// Lakehouse (a facade.Lakehouse) reads native (Iceberg) datasets:
	// sources, and targets of Tier B strategies. Required only when one is
	// read.
	Lakehouse nativeReader
	// delta maps a source dataset id to the ledger transactions of its delta
	// window: the source is read as only the rows those transactions wrote
	// (the row store records the writing transaction of each row; on
	// Iceberg, the data files their append snapshots added), where
	// incremental.ChooseReadMode allows it for deltaReq's outputs, else
	// whole (see deltaread.go). A source not in the map is read whole
	// (snapshot read).
	delta    map[string][]string
	deltaReq *deltaRequest
	// sourceFilter maps a source dataset id to column ranges (see
	// facade.Range): the source is read as only the rows satisfying every
	// range, wherever it lives. A source that lives in Iceberg is scanned
	// with the ranges as its filter, so only the data files that can hold
	// matching rows are read (partition and min/max pruning); a row-store
	// source is filtered in SQL. A ledger window (Low, High] over a
	// timestamp column is facade.Range{Column: c, Min: Low, MinExclusive:
	// true, Max: High}. Targets of Tier B strategies are always read whole.
	sourceFilter map[string][]facade.Range
	// txnIDs maps an output dataset to its ledger transaction id, recorded
	// with each row written to the row store.
	txnIDs map[string]string
	// maxCrossJoinRows is the cross-join preflight's limit. Zero means
	// defaultMaxCrossJoinRows; negative disables the preflight.
	maxCrossJoinRows int64
	// orderBy maps an output dataset to the order ComputeRows streams its
	// rows in (ORDER BY over the output's columns), e.g. the partition order
	// a partitioned table requires (facade.Facade.WriteOrder).
	orderBy map[string][]facade.OrderKey

	// floatsExact: the transaction already makes float text forms exact
	// (extra_float_digits >= 1, set by the write dispatch's beginTx), so
	// Apply need not read and restore the setting.
	floatsExact bool
	// read: the datasets rows read already, on the session of the write's
	// transaction (the dispatcher's, in the intent's round trip); prepare
	// reads them itself otherwise.
	read *datasetsRead
	// modelProgress, when set, sees each window a Model scored (the
	// Dispatcher's Observer, when it has a ModelWindow method).
	modelProgress func(output string, ev model.WindowEvent)
	// modelRun, when set, lets a Model's write read only the source rows
	// changed since its last run, and holds what to store once it commits.
	modelRun *modelRun
	// refresh is the run of a declared output (refresh.go); nil otherwise.
	// Only the write dispatch's arms run one (refreshes set).
	refresh   *refreshRun
	refreshes bool
}

// schemaName is the control-plane schema, unquoted.
func (e *Env) schemaName() string {
	if e.Schema == "" {
		return ledger.DefaultSchema
	}
	return e.Schema
}

func (e *Env) ctlSchema() string {
	s := e.Schema
	if s == "" {
		s = ledger.DefaultSchema
	}
	return pgx.Identifier{s}.Sanitize()
}

func (e *Env) maxCross() int64 {
	switch {
	case e.maxCrossJoinRows == 0:
		return defaultMaxCrossJoinRows
	case e.maxCrossJoinRows < 0:
		return 0
	}
	return e.maxCrossJoinRows
}

func (e *Env) txnID(output string) any {
	if id := e.txnIDs[output]; id != "" {
		return id
	}
	return nil
}
