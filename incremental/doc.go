// Package incremental decides how a build reads its sources — a full
// (snapshot) read or a delta over the transactions committed since its last
// build — and windows those transactions so that none is ever skipped.
//
// # Delta or full read: the rule
//
// [ChooseReadMode] is the one rule that decides whether a build reads a
// source as a delta (only the rows its window's transactions wrote) or
// whole (a snapshot read, a full rebuild). It is pure: the build gathers
// the facts first (the output's resolved [sink.Decision] and the sink of
// its last committed write, the source's sink and its window's ledger
// transactions) and asks it per source. A delta is allowed only where it
// is provably the window's whole change:
//
//   - The first write after a flip is a full rebuild: when the output's
//     last committed write was on the other sink, or the output is an
//     Iceberg table without a committed write yet, every source is read
//     whole.
//   - A source read from the row store is read as a delta only when every
//     window transaction wrote its rows there (its ledger sink is
//     Postgres). A transaction written to Iceberg has no rows in the row
//     store under its id — the row store was never written, or was
//     drained — and a delta predicate would silently read nothing for it.
//   - A source on Iceberg (an upstream lakewrite writes to Iceberg) is
//     read as the rows its window's snapshots appended, found by the
//     lakewrite.txn-id of their snapshot summaries, only when every window
//     transaction is an Iceberg append and the table holds them, and
//     everything after them up to its head, as append snapshots (the
//     lakehouse answers Source.AppendOnly; the facade's ScanAppended). A
//     window holding or followed by a replace, a merge, a delete or a
//     compaction, or whose snapshots expired, is read whole: never a
//     delta that could miss a row.
//   - Anything else (a registered relation, a transaction that is not a
//     committed write of the source) is read whole.
//
// A delta also needs a reader with a watermark: a window whose Low is zero
// (a first build) or whose High is before its Low is read as a snapshot.
//
// # Refresh: incremental or full, the rule
//
// An output may declare how its rows depend on its sources (a
// [Dependency]: output key columns and, per source, the columns equal to
// them). [ChooseRefresh] is the pure rule that decides whether a run of
// such an output recomputes only the key values its sources' changes
// touch or the whole output. The run gathers the facts first
// ([RefreshFacts]: the sink written and that of the last committed run;
// per source whether its changes since that run are known, whether it is
// mapped, its change images and its rows) and the rule allows an
// incremental run only when:
//
//   - the output has a committed earlier run on the sink it is written to
//     (no first write, no flip);
//   - every source's changes are known (a change-log window without a
//     TRUNCATE or full-rewrite mark, tracking installed before the last
//     run, the log not trimmed past it);
//   - every source with changes is mapped by the declaration;
//   - every changed source's share of change images to rows is at most
//     MaxShare ([DefaultMaxShare], 0.2, when unset). The crossover where a
//     keyed recompute stops paying depends on the output's shape and the
//     sources' indexes; the refresh benchmark measures it.
//
// Anything else is a full run, with the reason, and an output without a
// declaration is full as it always was ("" mode).
//
// # Windows and watermarks
//
// A delta reader consumes an upstream dataset's committed ledger
// transactions in half-open windows (low, high] of committed_at, the commit
// time the ledger recorded (the Iceberg snapshot time) — the same clock for
// the transactions and the windows; never a local wall clock or a build
// start. The next window's low is the previous window's high (the
// watermark the reader stored), so the windows tile time without overlap.
//
// # Never skip: the window-safety choice
//
// A transaction's committed_at is fixed at its Iceberg commit, but the
// transaction becomes visible in the ledger only at the ledger commit, a
// moment later. A reader whose high passed that committed_at in between
// would never read it. [Reader] therefore bounds high below everything still
// in flight:
//
//	high = min(database now, created_at of the oldest open intent) - skew
//
// with the database clock read before the open intents. The rule is the
// same for a source on Iceberg: its transactions' committed_at is their
// snapshot's commit time, and a snapshot of an intent still open is
// never in a window (its rows are read by the window that holds its
// commit). Every writer takes
// committed_at after its intent became visible, so an intent the reader saw
// open has committed_at > its created_at - skew >= high, and an intent
// not yet visible has committed_at > database now - skew >= high.
// The skew (NewReader's clockSkew, default 1 s) must cover how far a writer's clock may run behind
// the database's plus the precision committed_at loses (1 ms for Iceberg).
//
// The reader never waits: an open intent just holds the window below it
// until it commits, aborts or is swept. Waiting for in-flight intents would
// block readers behind slow writers; a bound on high costs at most
// the skew in latency plus the life of the oldest open intent (bounded by
// the sweeper). Requirements: writers stamp committed_at after Open returned
// (the ledger's Atomicity order), an aborted intent never commits later, and
// the reader reads the primary (on a replica, add the replication lag to
// the skew).
package incremental
