// Package sink decides where a write goes — the Postgres row store or an
// Iceberg table — from writer flags stored in Postgres, and dispatches the
// write to the matching arm.
//
// # Flags
//
// Flags exist per writer id (pipeline.output, sync.*, ingest.api, ...): cutover
// lists are segmented per writer, never one shared list. A writer has a
// default sink and a max sink from the ordered set [Postgres] ("pg") <
// [Iceberg] ("iceberg_native") ([Sink]); a (writer, dataset) override sets
// one dataset's sink, for canaries. Raising a writer's max to Iceberg while
// its default stays Postgres makes the flip opt-in per dataset. [Flags] is the operator API
// (migration 002_writer_flags.sql of package ledger holds the tables):
//
//	check    Flags.Check / Flags.Writer / Flags.Overrides
//	set      Flags.SetWriter (default, max), Flags.SetOverride (canary)
//	revert   Flags.ClearOverride, effective within the resolver TTL
//
// Setting a default or an override above the writer's max sink is refused
// with an error matching [ErrAboveCeiling] (errors.Is) that names the
// writer, the dataset, the sink and the max. Lowering the max
// sink below existing overrides is allowed: it is the kill switch, and
// resolution caps those overrides.
//
// # Resolution
//
// [Decide] is the pure rule: the override wins over the default; both are
// capped by the max sink, and capping is reported as Clamped. A writer with no
// flags row resolves to Postgres with Source [SourceUnknownWriter] — the safe
// default, since Postgres is where every write went before any cutover, and an
// error there would fail every deploy of a writer nobody has registered. A
// dataset with no override gets the writer default.
//
// The safe default must not undo a flip: package writestrategy's Dispatcher
// refuses, with an [*UnknownWriterError] (errors.Is(err, ErrUnknownWriter),
// naming the known writers), a write by an unknown writer to a dataset that
// lives on Iceberg or whose last write came from a registered writer (a typo
// such as "pipeline.ouput"); the first write of a new dataset by an unknown
// writer still goes to Postgres. A registered writer whose default moves a
// dataset last written by another writer is written and logged at Warn (see
// writestrategy's package documentation, "Sink guard").
//
// [Resolver] wraps a [Lookuper] (normally [*Flags]) with a cache: each
// resolution is kept for a TTL (default 5 s, at most 10 s, so a revert takes
// effect within 10 s), the cache is bounded, expiry is lazy (no goroutine),
// and it is safe for concurrent use. Every decision it returns, cached or not,
// is logged once at level Info with message "sink decision"
// and attributes writer, dataset, sink, requested, max, clamped, source,
// reason and cached, through the injected *slog.Logger.
//
// # Dispatch
//
// [RowSink] holds one arm per sink, generic over the result type.
// [RowSink.Run] calls the arm of a decision's sink; when that arm is nil it
// fails with an error matching [ErrMissingArm] before any work, so raising
// a flag before its arm exists fails the deploy loudly and writes nothing.
//
// The two outputs of a split flip as a pair: [Resolver.ResolvePair] gives
// both-Postgres (the combined statement) or both-Iceberg (two native
// writes, both staged before either commits: see package writestrategy),
// and an error matching [ErrMixedPair] otherwise. Set or clear both
// overrides in one [Flags.SetOverride] / [Flags.ClearOverride] call.
//
// Resolve once per build, before the delta block: the same [Decision] chooses
// the read mode (package incremental: an Iceberg sink forces a full rebuild)
// and the arm.
package sink
