package writestrategy

import "time"

// Names the external tests use.
type (
	Query    = queryStrategy
	Resolver = resolver
)

// Unexported API the external tests use under its former names.
var (
	Apply = applyStrategy

	ErrBatchSchema       = errBatchSchema
	ErrCrossJoinTooLarge = errCrossJoinTooLarge
	ErrRelationConflict  = errRelationConflict
)

const (
	KindJoin      = kindJoin
	KindSplit     = kindSplit
	KindTransform = kindTransform
	InnerJoin     = innerJoin

	PhaseResolve       = phaseResolve
	PhaseOpen          = phaseOpen
	PhaseApply         = phaseApply
	PhaseCompute       = phaseCompute
	PhaseCheck         = phaseCheck
	PhaseCatalogCommit = phaseCatalogCommit
	PhaseLedgerCommit  = phaseLedgerCommit
	PhaseMaintain      = phaseMaintain

	NextWait        = nextWait
	NextRollForward = nextRollForward
	NextAbort       = nextAbort
	NextUnknown     = nextUnknown
)

// Replayed is r.replayed.
func Replayed(r WriteResult) bool { return r.replayed }

// ResultColumns is r.columns.
func ResultColumns(r WriteResult) Schema { return r.columns }

// RunSnapshotID is r.snapshotID.
func RunSnapshotID(r *ShadowRun) int64 { return r.snapshotID }

// RunFinishedAt is r.finishedAt.
func RunFinishedAt(r *ShadowRun) time.Time { return r.finishedAt }
