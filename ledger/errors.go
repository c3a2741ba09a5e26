package ledger

import (
	"errors"
	"fmt"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrBusy: another intent for the same dataset stayed open for longer
	// than the wait budget (or the caller's context ran out while waiting).
	ErrBusy = errors.New("ledger: dataset busy: another write intent is open")
	// ErrDatasetNotFound: the dataset id is not in the datasets table.
	ErrDatasetNotFound = errors.New("ledger: dataset not found")
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
)

// BusyError is returned by Open when the dataset stayed busy. It matches
// ErrBusy.
type BusyError struct {
	DatasetID string
	HolderID  string // the open intent that held the dataset, when known
	Waited    string
	Cause     error // the context error, if the context ended the wait
}

func (e *BusyError) Error() string {
	msg := fmt.Sprintf("ledger: dataset %q busy: intent %s is still open after waiting %s", e.DatasetID, e.HolderID, e.Waited)
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
// open any more, or fenced. It matches ErrIntentNotFound, ErrNotOpen or
// ErrFenced.
type StateError struct {
	ID      string
	Status  string // current status, "" when not found
	Attempt int64  // current attempt
	kind    error
}

func (e *StateError) Error() string {
	switch e.kind {
	case ErrIntentNotFound:
		return fmt.Sprintf("ledger: intent %s not found", e.ID)
	case ErrFenced:
		return fmt.Sprintf("ledger: intent %s is fenced: a sweeper claimed it (attempt %d)", e.ID, e.Attempt)
	default:
		return fmt.Sprintf("ledger: intent %s is %s, not open", e.ID, e.Status)
	}
}

// Is matches the sentinel of the kind of state error.
func (e *StateError) Is(target error) bool { return target == e.kind }

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
