package facade

import (
	"errors"
	"fmt"

	"github.com/apache/iceberg-go/catalog/rest"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrInvalidDatasetID: the dataset id is empty, too long, or holds
	// characters the naming cannot map to a safe table identifier (see
	// CheckDatasetID).
	ErrInvalidDatasetID = vocab.ErrInvalidDatasetID
	// ErrInvalidColumnName: a column name outside the rule of
	// CheckColumnNames.
	ErrInvalidColumnName = vocab.ErrInvalidColumnName
	// ErrInvalidRequest: the write request itself is malformed (no schema,
	// no rows, unknown mode, reserved column names).
	ErrInvalidRequest = identity.ErrInvalidRequest
	// ErrTableNotFound: the dataset has no Iceberg table (yet): it was never
	// written through the facade, or its table was dropped. Whether the
	// dataset is registered is the ledger's business
	// (ledger.ErrDatasetNotFound), a different condition.
	ErrTableNotFound = errors.New("facade: table not found")
	// ErrSnapshotNotFound: a scan or checksum named a snapshot the table
	// does not have.
	ErrSnapshotNotFound = errors.New("facade: snapshot not found")
	// ErrCommitConflict: the catalog rejected the commit because the table
	// moved underneath it, and the retry budget is spent (or a retry would
	// be unsound, e.g. an append whose row indices no longer continue the
	// table). Nothing was committed; the staged files were deleted. Safe to
	// retry the whole write. The error names the dataset and the number of
	// attempts, and wraps the catalog's own error too.
	ErrCommitConflict = errors.New("facade: commit conflict")
	// ErrCommitStateUnknown: the catalog failed in a way that does not say
	// whether the commit landed (network error, HTTP 5xx, database error
	// during the pointer swap). Never retry blindly: reconcile with FindTxn.
	// The staged files are kept, because the snapshot may reference them.
	// The error names the dataset and the number of attempts, and wraps
	// the catalog's own error too.
	ErrCommitStateUnknown = errors.New("facade: commit state unknown")
	// ErrAlreadyFinished: Commit or Abort called on a staged write that was
	// already committed or aborted.
	ErrAlreadyFinished = errors.New("facade: staged write already finished")
	// ErrCatalogAuth: the catalog refused the caller's credentials (a REST
	// catalog answered 401, 403 or 419, or its OAuth2 token endpoint
	// rejected the client credentials). A catalog refuses such a request
	// before acting on it, so nothing was committed, and a write's staged
	// files are deleted. Retrying is pointless until the credentials or
	// grants are fixed. The error also matches the catalog's own (e.g.
	// iceberg-go's rest.ErrUnauthorized, rest.ErrForbidden or
	// rest.ErrOAuthError) and names the refused call.
	ErrCatalogAuth = errors.New("facade: catalog refused the credentials")
	// ErrCatalogTimeout: a load or creation of the table (Stage,
	// WriteOrder, Scan, FindTxn) got no answer from the catalog within
	// Config.CatalogWait (while the caller's context was still live).
	// Nothing was written. With a
	// catalog sharing the writers' pool it means the pool had no free
	// connection: size the pool for the catalog too, then retry.
	ErrCatalogTimeout = errors.New("facade: no answer from the catalog within Config.CatalogWait")
)

// SchemaMismatchError reports columns of an append whose names or types do
// not match the table. Fields: Dataset, Columns (the offending business
// columns), Detail.
type SchemaMismatchError = identity.SchemaMismatchError

// UnsupportedTypeError reports a column whose Arrow type has no Iceberg
// mapping. Fields: Column, Type.
type UnsupportedTypeError = identity.UnsupportedTypeError

// NullInRequiredError reports a NULL value in a column the table declares
// required (iceberg-go v0.7.0 would silently store it as a zero value).
// Field: Column.
type NullInRequiredError = identity.NullInRequiredError

// isAuthError: the catalog refused the request for its credentials.
func isAuthError(err error) bool {
	return err != nil && (errors.Is(err, rest.ErrUnauthorized) || errors.Is(err, rest.ErrForbidden) ||
		errors.Is(err, rest.ErrAuthorizationExpired) || errors.Is(err, rest.ErrOAuthError))
}

// authError returns err wrapped with ErrCatalogAuth and op (what was
// refused, e.g. "commit lakewrite.orders") when the catalog refused the
// credentials, else err unchanged. The result matches ErrCatalogAuth and
// the catalog's own error (e.g. iceberg-go's rest.ErrUnauthorized,
// rest.ErrForbidden or rest.ErrOAuthError).
func authError(op string, err error) error {
	if !isAuthError(err) || errors.Is(err, ErrCatalogAuth) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrCatalogAuth, op, err)
}
