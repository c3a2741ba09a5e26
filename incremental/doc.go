// Package incremental decides how a build reads its sources — a full
// (snapshot) read or a delta over the transactions committed since its last
// build — and windows those transactions so that none is ever skipped.
//
// # Full rebuild first
//
// The one rule, in one place: an Iceberg sink forces a full rebuild.
// [ClampReadMode] takes the [sink.Decision] the build resolved, so resolve
// the sink first, then choose the read mode, then run the delta block (a
// delta predicate over a row store the Iceberg path no longer writes would
// silently read zero rows). A delta also needs a window that allows one
// ([WindowAllowsDelta]).
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
// with the database clock read before the open intents. Every writer takes
// committed_at after its intent became visible, so an intent the reader saw
// open has committed_at > its created_at - skew >= high, and an intent
// not yet visible has committed_at > database now - skew >= high.
// The skew (NewReader's clockSkew, default 1 s) must cover how far a writer's clock may run behind
// the database's plus the precision committed_at loses (1 ms for Iceberg).
// See [SafeHigh].
//
// The reader never waits: an open intent just holds the window below it
// until it commits, aborts or is swept. Waiting for in-flight intents would
// block readers behind slow writers; a bound on high costs at most
// the skew in latency plus the life of the oldest open intent (bounded by
// the sweeper). Requirements: writers stamp committed_at after Open returned
// (the ledger's Atomicity order), an aborted intent never commits later, and
// the reader reads the primary (on a replica, add the replication lag to
// the skew).
//
// [DeltaPredicate] and [TxnPredicate] turn a window into SQL with the values
// as parameters and the column names quoted.
package incremental
