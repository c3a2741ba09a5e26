package otelobserver

import (
	"context"
	"errors"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// The error kinds ErrorKind returns, in the order it tries them: causes
// (a cancel, a timeout, a lost connection) before the consequences they
// may also match (an unknown outcome).
const (
	KindCanceled           = "canceled"             // context.Canceled
	KindDeadlineExceeded   = "deadline_exceeded"    // context.DeadlineExceeded
	KindServerTimeout      = "server_timeout"       // writestrategy.ErrServerTimeout
	KindConnectionLost     = "connection_lost"      // writestrategy.ErrConnectionLost
	KindCatalogTimeout     = "catalog_timeout"      // facade.ErrCatalogTimeout
	KindCatalogAuth        = "catalog_auth"         // facade.ErrCatalogAuth
	KindConflict           = "conflict"             // facade.ErrCommitConflict
	KindCommitStateUnknown = "commit_state_unknown" // facade.ErrCommitStateUnknown
	KindOutcomeUnknown     = "outcome_unknown"      // ledger.ErrOutcomeUnknown
	KindSinkChanged        = "sink_changed"         // writestrategy.ErrSinkChanged
	KindBusy               = "busy"                 // ledger.ErrBusy
	KindLostHold           = "lost_hold"            // ledger.ErrLostHold
	KindFenced             = "fenced"               // ledger.ErrFenced
	KindVetoed             = "vetoed"               // ledger.ErrVetoed
	KindNoConnection       = "no_connection"        // ledger.ErrNoConnection
	KindTransactionPooling = "transaction_pooling"  // ledger.ErrTransactionPooling
	KindUnresolved         = "unresolved"           // ledger.ErrUnresolved
	KindNotOwner           = "not_owner"            // ledger.ErrNotOwner
	KindDatasetNotFound    = "dataset_not_found"    // ledger.ErrDatasetNotFound, ledger.ErrDatasetDropped
	KindRelation           = "relation"             // writestrategy.ErrRelationDataset, ErrRelationChanged
	KindSinkConfig         = "sink_config"          // sink.ErrUnknownWriter, ErrAboveCeiling, ErrMixedPair, ErrMissingArm
	KindSchemaChange       = "schema_change"        // facade.ErrSchemaChange
	KindUnsupportedType    = "unsupported_type"     // writestrategy.ErrUnsupportedType, cursor.ErrUnsupportedType
	KindValue              = "value"                // cursor.ErrOutOfRange, cursor.ErrRunaway
	KindInvalid            = "invalid"              // writestrategy.ErrInvalid, ErrUnsafeIdentifier, ledger.ErrInvalid, facade.ErrInvalidRequest, ...
	KindQuery              = "query"                // a *writestrategy.QueryError (bad SQL, a runtime error such as division by zero)
	KindOther              = "other"                // none of the above
)

// kinds are the error kinds with the sentinel errors each matches, in
// the order ErrorKind tries them.
var kinds = []struct {
	kind string
	errs []error
}{
	{KindCanceled, []error{context.Canceled}},
	{KindDeadlineExceeded, []error{context.DeadlineExceeded}},
	{KindServerTimeout, []error{writestrategy.ErrServerTimeout}},
	{KindConnectionLost, []error{writestrategy.ErrConnectionLost}},
	{KindCatalogTimeout, []error{facade.ErrCatalogTimeout}},
	{KindCatalogAuth, []error{facade.ErrCatalogAuth}},
	{KindConflict, []error{facade.ErrCommitConflict}},
	{KindCommitStateUnknown, []error{facade.ErrCommitStateUnknown}},
	{KindOutcomeUnknown, []error{ledger.ErrOutcomeUnknown}},
	{KindSinkChanged, []error{writestrategy.ErrSinkChanged}},
	{KindBusy, []error{ledger.ErrBusy}},
	{KindLostHold, []error{ledger.ErrLostHold}},
	{KindFenced, []error{ledger.ErrFenced}},
	{KindVetoed, []error{ledger.ErrVetoed}},
	{KindNoConnection, []error{ledger.ErrNoConnection}},
	{KindTransactionPooling, []error{ledger.ErrTransactionPooling}},
	{KindUnresolved, []error{ledger.ErrUnresolved}},
	{KindNotOwner, []error{ledger.ErrNotOwner}},
	{KindDatasetNotFound, []error{ledger.ErrDatasetNotFound, ledger.ErrDatasetDropped}},
	{KindRelation, []error{writestrategy.ErrRelationDataset, writestrategy.ErrRelationChanged}},
	{KindSinkConfig, []error{sink.ErrUnknownWriter, sink.ErrAboveCeiling, sink.ErrMixedPair, sink.ErrMissingArm}},
	{KindSchemaChange, []error{facade.ErrSchemaChange}},
	{KindUnsupportedType, []error{writestrategy.ErrUnsupportedType, cursor.ErrUnsupportedType}},
	{KindValue, []error{cursor.ErrOutOfRange, cursor.ErrRunaway}},
	{KindInvalid, []error{writestrategy.ErrInvalid, writestrategy.ErrUnsafeIdentifier, ledger.ErrInvalid,
		facade.ErrInvalidRequest, facade.ErrInvalidDatasetID, facade.ErrInvalidColumnName}},
}

// ErrorKind classifies err by the sentinel errors of lakewrite's packages
// (errors.Is), the first kind that matches in the order of the Kind
// constants; a *writestrategy.QueryError matching none of them is
// KindQuery, anything else KindOther ("" for a nil err). It is the
// error.type of the spans and metrics.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range kinds {
		for _, e := range k.errs {
			if errors.Is(err, e) {
				return k.kind
			}
		}
	}
	var qe *writestrategy.QueryError
	if errors.As(err, &qe) {
		return KindQuery
	}
	return KindOther
}
