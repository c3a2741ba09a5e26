package ledger

import (
	"errors"
	"fmt"

	"github.com/lakewrite/lakewrite/internal/vocab"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrBusy: another intent for the same dataset stayed open for longer
	// than the wait budget (or the caller's context ran out while waiting).
	ErrBusy = errors.New("ledger: dataset busy: another write intent is open")
	// ErrDatasetNotFound: the dataset id is not in the datasets table. Sink
	// and writestrategy return it too for an unregistered dataset.
	ErrDatasetNotFound = vocab.ErrDatasetNotFound
	// ErrIntentNotFound: no intent with that id.
	ErrIntentNotFound = errors.New("ledger: intent not found")
	// ErrNotOpen: the intent is already committed or aborted.
	ErrNotOpen = errors.New("ledger: intent is not open")
	// ErrFenced: the intent is open but was claimed by a sweeper (its
	// attempt changed); only the sweeper may decide its outcome now.
	ErrFenced = errors.New("ledger: intent fenced by a newer attempt")
	// ErrVetoed: an expectation refused the commit; the intent is aborted.
	ErrVetoed = errors.New("ledger: commit vetoed by an expectation")
	// ErrInvalid: a bad argument (empty id, negative count, zero time, ...).
	ErrInvalid = errors.New("ledger: invalid argument")
	// ErrNotOwner: the dataset is owned by another writer (see
	// Ledger.ClaimDataset).
	ErrNotOwner = errors.New("ledger: dataset owned by another writer")
	// errIDInUse: a pre-minted transaction id already names another intent.
	errIDInUse = errors.New("ledger: transaction id already in use")
	// ErrOutcomeUnknown marks a write whose outcome is unknown (for example
	// an Iceberg commit whose state could not be confirmed). With leaves the
	// intent open for Sweep/Recover instead of aborting it when the error
	// returned by the caller's function matches it (errors.Is) or has a
	// method OutcomeUnknown() bool that reports true.
	ErrOutcomeUnknown = errors.New("ledger: write outcome unknown")
	// ErrLostHold: the writer no longer holds the intent: the session that
	// held its lock broke (process, network or server restart) or the hold
	// was released. The intent may be reconciled by another process at any
	// moment; the writer must not make its write visible any more.
	ErrLostHold = errors.New("ledger: writer lost its hold on the intent")
	// ErrUnresolved: Open found the dataset held by an intent whose writer
	// is gone, and its Lookup could not tell whether that write landed. The
	// intent stays open (claimed) for a later Open, Sweep or Recover. The
	// error also matches ErrBusy (the dataset is still busy), unwraps to the
	// Lookup's error and names the dead writer's intent.
	ErrUnresolved = errors.New("ledger: dead writer's intent could not be reconciled")
	// ErrNoConnection: Open could not get a pool connection to hold the
	// intent within Config.WaitTimeout (each open intent holds one). The
	// pool is too small for the writes running at once; nothing was
	// opened.
	ErrNoConnection = errors.New("ledger: no pool connection to hold the intent")
)

// busyError is returned by Open when the dataset stayed busy. It matches
// ErrBusy and unwraps to the context error when the context ended the wait.
// Its message names the dataset, the holder and how long Open waited, and
// says so when the holder's writer is gone but Open could not reconcile it
// (pass OpenParams.Lookup, or run Sweep or Recover).
type busyError struct {
	// holderID is the open intent that held the dataset at the last
	// look, when known (empty when writers queued ahead were waited for).
	holderID string

	datasetID  string
	holderGone bool
	waited     string
	cause      error // the context error, if the context ended the wait
}

func (e *busyError) Error() string {
	msg := fmt.Sprintf("ledger: dataset %q busy: intent %s is still open after waiting %s", e.datasetID, e.holderID, e.waited)
	if e.holderID == "" {
		msg = fmt.Sprintf("ledger: dataset %q busy: other writers were still ahead in its queue after waiting %s", e.datasetID, e.waited)
	}
	if e.holderGone {
		msg += " (its writer is gone: reconcile it with OpenParams.Lookup, Sweep or Recover)"
	}
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

func (e *busyError) Is(target error) bool { return target == ErrBusy }

func (e *busyError) Unwrap() error { return e.cause }

// notOwner is the error of a writer that opens an intent on, or claims, a
// dataset that another writer owns. It matches ErrNotOwner.
func notOwner(datasetID, owner, writerID string) error {
	return fmt.Errorf("%w: dataset %q is owned by writer %q; writer %q may not write or claim it", ErrNotOwner, datasetID, owner, writerID)
}

// stateError says why an intent could not change state: it is missing, not
// open any more, fenced, or its writer lost its hold. It matches
// ErrIntentNotFound, ErrNotOpen, ErrFenced or ErrLostHold; for a lost hold
// it unwraps to why the hold was lost (the connection error). Its message
// names the intent and, when fenced, its current attempt.
type stateError struct {
	status string // current status, "" when not found or unknown

	id      string
	attempt int64 // current attempt, 0 when unknown
	cause   error // why the hold was lost, for ErrLostHold; nil otherwise
	kind    error
}

func (e *stateError) Error() string {
	switch e.kind {
	case ErrIntentNotFound:
		return fmt.Sprintf("ledger: intent %s not found", e.id)
	case ErrFenced:
		return fmt.Sprintf("ledger: intent %s is fenced: a sweeper claimed it (attempt %d)", e.id, e.attempt)
	case ErrLostHold:
		msg := fmt.Sprintf("ledger: intent %s: this writer no longer holds it", e.id)
		if e.cause != nil {
			msg += ": " + e.cause.Error()
		}
		return msg
	default:
		return fmt.Sprintf("ledger: intent %s is %s, not open", e.id, e.status)
	}
}

func (e *stateError) Is(target error) bool { return target == e.kind }

func (e *stateError) Unwrap() error { return e.cause }

// unresolvedError is returned by Open when the dataset is held by an
// intent whose writer is gone and OpenParams.Lookup could not tell whether
// its write landed. The intent is left open (claimed, so its writer is
// fenced) for a later Open, Sweep or Recover; nothing was opened. It
// matches ErrUnresolved and ErrBusy and unwraps to the Lookup's error.
type unresolvedError struct {
	datasetID string
	holderID  string // the dead writer's intent
	err       error
}

func (e *unresolvedError) Error() string {
	return fmt.Sprintf("ledger: dataset %q is held by intent %s whose writer is gone, and its outcome is unknown (left open): %v",
		e.datasetID, e.holderID, e.err)
}

func (e *unresolvedError) Is(target error) bool { return target == ErrUnresolved || target == ErrBusy }

func (e *unresolvedError) Unwrap() error { return e.err }

// vetoError is returned when an expectation refused a commit. It matches
// ErrVetoed and unwraps to the expectation's error.
type vetoError struct {
	id     string
	reason error
}

func (e *vetoError) Error() string {
	return fmt.Sprintf("ledger: commit of intent %s vetoed: %v", e.id, e.reason)
}

func (e *vetoError) Is(target error) bool { return target == ErrVetoed }

func (e *vetoError) Unwrap() error { return e.reason }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func outcomeUnknown(err error) bool {
	if errors.Is(err, ErrOutcomeUnknown) {
		return true
	}
	var u interface{ OutcomeUnknown() bool }
	return errors.As(err, &u) && u.OutcomeUnknown()
}
