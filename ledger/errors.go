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
	// ErrIDInUse: a pre-minted transaction id already names another intent.
	ErrIDInUse = errors.New("ledger: transaction id already in use")
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
	// intent stays open (claimed) for a later Open, Sweep or Recover. An
	// *UnresolvedError also matches ErrBusy: the dataset is still busy.
	ErrUnresolved = errors.New("ledger: dead writer's intent could not be reconciled")
	// ErrNoConnection: Open could not get a pool connection to hold the
	// intent within Config.WaitTimeout (each open intent holds one). The
	// pool is too small for the writes running at once; nothing was
	// opened.
	ErrNoConnection = errors.New("ledger: no pool connection to hold the intent")
)

// BusyError is returned by Open when the dataset stayed busy. It matches
// ErrBusy.
type BusyError struct {
	DatasetID string
	// HolderID is the open intent that held the dataset at the last
	// look, when known (empty when writers queued ahead were waited for).
	HolderID string
	// HolderGone reports that the holder's writer is gone (its session lock
	// is no longer held) but Open could not reconcile it: pass
	// OpenParams.Lookup, or run Sweep or Recover.
	HolderGone bool
	Waited     string
	Cause      error // the context error, if the context ended the wait
}

func (e *BusyError) Error() string {
	msg := fmt.Sprintf("ledger: dataset %q busy: intent %s is still open after waiting %s", e.DatasetID, e.HolderID, e.Waited)
	if e.HolderID == "" {
		msg = fmt.Sprintf("ledger: dataset %q busy: other writers were still ahead in its queue after waiting %s", e.DatasetID, e.Waited)
	}
	if e.HolderGone {
		msg += " (its writer is gone: reconcile it with OpenParams.Lookup, Sweep or Recover)"
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is reports ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Unwrap returns the context error, if any.
func (e *BusyError) Unwrap() error { return e.Cause }

// OwnerError is returned when a writer opens an intent on, or claims, a
// dataset that another writer owns. It matches ErrNotOwner.
type OwnerError struct {
	DatasetID string
	Owner     string // the owning writer
	WriterID  string // the writer that was refused
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("ledger: dataset %q is owned by writer %q; writer %q may not write or claim it", e.DatasetID, e.Owner, e.WriterID)
}

// Is reports ErrNotOwner.
func (e *OwnerError) Is(target error) bool { return target == ErrNotOwner }

// StateError says why an intent could not change state: it is missing, not
// open any more, fenced, or its writer lost its hold. It matches
// ErrIntentNotFound, ErrNotOpen, ErrFenced or ErrLostHold.
type StateError struct {
	ID      string
	Status  string // current status, "" when not found or unknown
	Attempt int64  // current attempt, 0 when unknown
	// Cause is why the hold was lost (the connection error), for
	// ErrLostHold; nil otherwise.
	Cause error
	kind  error
}

func (e *StateError) Error() string {
	switch e.kind {
	case ErrIntentNotFound:
		return fmt.Sprintf("ledger: intent %s not found", e.ID)
	case ErrFenced:
		return fmt.Sprintf("ledger: intent %s is fenced: a sweeper claimed it (attempt %d)", e.ID, e.Attempt)
	case ErrLostHold:
		msg := fmt.Sprintf("ledger: intent %s: this writer no longer holds it", e.ID)
		if e.Cause != nil {
			msg += ": " + e.Cause.Error()
		}
		return msg
	default:
		return fmt.Sprintf("ledger: intent %s is %s, not open", e.ID, e.Status)
	}
}

// Is matches the sentinel of the kind of state error.
func (e *StateError) Is(target error) bool { return target == e.kind }

// Unwrap returns the cause of a lost hold, if any.
func (e *StateError) Unwrap() error { return e.Cause }

// UnresolvedError is returned by Open when the dataset is held by an
// intent whose writer is gone and OpenParams.Lookup could not tell whether
// its write landed. The intent is left open (claimed, so its writer is
// fenced) for a later Open, Sweep or Recover; nothing was opened. It
// matches ErrUnresolved and ErrBusy and unwraps to the Lookup's error.
type UnresolvedError struct {
	DatasetID string
	HolderID  string // the dead writer's intent
	Err       error
}

func (e *UnresolvedError) Error() string {
	return fmt.Sprintf("ledger: dataset %q is held by intent %s whose writer is gone, and its outcome is unknown (left open): %v",
		e.DatasetID, e.HolderID, e.Err)
}

// Is reports ErrUnresolved and ErrBusy.
func (e *UnresolvedError) Is(target error) bool { return target == ErrUnresolved || target == ErrBusy }

// Unwrap returns the Lookup's error.
func (e *UnresolvedError) Unwrap() error { return e.Err }

// VetoError is returned when an expectation refused a commit. It matches
// ErrVetoed and unwraps to the expectation's error.
type VetoError struct {
	ID     string
	Reason error
}

func (e *VetoError) Error() string {
	return fmt.Sprintf("ledger: commit of intent %s vetoed: %v", e.ID, e.Reason)
}

// Is reports ErrVetoed.
func (e *VetoError) Is(target error) bool { return target == ErrVetoed }

// Unwrap returns the expectation's error.
func (e *VetoError) Unwrap() error { return e.Reason }

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
