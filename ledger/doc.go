// Package ledger is lakewrite's write-intent ledger and control-plane schema.
//
// Every output write is wrapped in an intent, a row of
// pipeline_build_transactions that goes open -> committed or open ->
// aborted:
//
//	in, err := l.Open(ctx, ledger.OpenParams{DatasetID: "orders", WriterID: "pipeline.output",
//		Sink: sink.Iceberg, WriteMode: facade.Replace})
//	// ... compute and write, carrying in.ID into the Iceberg snapshot summary ...
//	err = l.Commit(ctx, in, ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt})
//
// The ledger records values of lakewrite's shared types, spelled where
// users meet them: the sink of a write is a sink.Sink (sink.Postgres,
// sink.Iceberg), its write mode a facade.WriteMode (facade.Replace,
// facade.Append) or the ledger's own [Maintenance]. The stored text ("pg",
// "iceberg_native", "replace", "append", "maintenance") never changes.
//
// or, in one call, With (the ledger's pgx.BeginFunc), or WithTx when the
// write and the ledger commit share one Postgres transaction (the row-store
// path). Open and Commit are each a short transaction of their own: the
// intent is visible to every process before the write starts, and no
// transaction or transaction-scoped lock spans the long write. Every Open
// ends in Commit, Abort or Release (With and WithTx do it for you): on a
// direct connection an open intent holds a connection (see Writer
// liveness), and a pool's Close waits for it.
//
// # Serialization
//
// A unique partial index admits one open intent per dataset. A second Open
// for a busy dataset waits until the first intent ends, and returns an
// error matching ErrBusy once Config.WaitTimeout or the context runs out,
// or at once with OpenParams.NoWait. Datasets never wait on each other. Writers
// waiting for a dataset are served in turn: each joins the dataset's queue
// (an advisory lock Postgres grants in request order, taken on its held
// session), and while writers are queued no one else opens an intent of
// the dataset; at the head of the queue it waits on the holder's lock, so
// it opens as soon as the holder lets go. A writer that ends an intent and
// opens the next at once therefore cannot keep a waiting one out: a waiter
// waits for the writers ahead of it, not for luck. Without a held session
// (an intent held by a lease, a pgx.Tx, the ledger's own *pgx.Conn) Open
// retries with jittered exponential backoff instead (up to 1s between
// attempts), each attempt bounded by lock_timeout.
//
// # Owners
//
// A dataset may have an owner writer (ClaimDataset; SetDatasetOwner for an
// operator): Open then refuses any other writer with an error matching
// ErrNotOwner and leaves no intent. Unclaimed datasets accept every
// writer. The manual-table example claims the datasets it declares, so a
// pipeline output of the same id cannot overwrite an uploaded table, nor
// the other way round.
//
// # Commit
//
// Commit is conditional on the intent being open with the attempt it was
// opened with. It stamps the row count from the write's commit result (never
// a recount), committed_at = the commit time passed in (the Iceberg
// snapshot's timestamp, not now()), and the dataset's source watermark,
// row count, status, sink and schema, after Config.Expectations had their
// chance to veto. CommitTx does the same inside the caller's transaction;
// CommitTxNow stamps the database clock as the commit time, and
// CommitTxEnd commits the caller's transaction too.
// Check asks the expectations without committing anything, for writers that
// make data visible elsewhere first (the Iceberg arm asks before its
// snapshot commit, so a veto leaves the table as it was).
//
// With must be given the outcome, not a committed intent: fn returns the
// outcome and With commits it (a fn that commits or aborts the intent itself
// gets an error matching ErrInvalid). With and WithTx make their clean-up
// context (context.WithoutCancel of the caller's, bounded to 30s) when fn
// has returned, so a write that fails late,
// or after its context was cancelled, is still aborted.
//
// # Writer liveness
//
// An open intent belongs to a live writer, and the ledger tells a dead
// writer from a slow one. It does so in one of two ways, chosen per Open:
// a session lock where the ledger's connection reaches PostgreSQL
// directly, a lease everywhere else.
//
// Session lock (the fast path, Config.Liveness = LivenessAuto on a direct
// connection). Open takes a dedicated session (a connection acquired from
// the pool, or the ledger's *pgx.Conn) and on it a session-level advisory
// lock, pg_advisory_lock of a 64-bit key derived from the schema name and
// the intent id, before it inserts the intent row, which records the key
// (lock_key). The session, and the lock, are kept until Commit or Abort
// returns or Release is called. The writer is alive exactly while that
// lock is granted in the database (pg_locks), so a dead writer is told
// without waiting for any age. No transaction is held open: the session
// sits idle between Open and Commit, and Commit runs on it. CommitTx hands
// the intent over to the caller's transaction: the row it updated stays
// locked by that transaction until it ends, so the session is released at
// once. A writer whose rows and ledger commit share one transaction may
// run it on the held session itself (Intent.BeginTx): it needs no second
// connection, and the lock is given up, and with CommitTxEnd the
// transaction committed, in the round trip of the ledger commit. The lock
// is taken in the round trip that inserts the intent row, before the
// insert runs; the writer's first reads (OpenParams.Reads) can go in that
// round trip too.
//
// Lease (through any pooler, or Config.Liveness = LivenessLease). A pooler
// (PgBouncer, Supavisor, a hosted service's pooler) cannot hold a session
// lock for its client: in transaction mode the lock would stay on
// whichever server connection ran the statement, outlive the writer and
// make a dead intent look alive for ever (or be released by another
// client). Open tells a direct connection from a pooled one by the key
// the server sent at connection start: a direct connection's process id
// is its backend's (pg_backend_pid), a pooler hands out a key of its own,
// in session mode as in transaction mode (checked once per connection,
// one round trip). Through a pooler Open takes no session and no session
// lock: the intent row gets a lease, lease_until = the database clock +
// Config.Lease (30s by default), stamped by the insert. The writer is
// alive while its lease runs. The live call renews it: With and WithTx
// while fn runs, the writestrategy Dispatcher while a write runs, and
// anyone through KeepAlive, each every Config.Lease/3, from a goroutine
// started and joined inside the call, on the pool (never on the write's
// own connection, so a long statement of the write, a server-side compute
// before its first row or a long catalog commit, does not delay it).
// Alive and Renew renew it too. Release of an intent left open ends its
// lease at once. Every statement of a lease is a transaction of its own
// (the only advisory lock is the transaction-scoped one of the dataset's
// queue check, released with its statement), so nothing outlives the
// intent on a pooled server connection. A writer that composes Open and
// Commit itself must renew (KeepAlive, Renew) when its write may last
// longer than the lease, or another writer may take the intent over.
//
// When the writer is gone (its lock released, its lease lapsed), Open with
// OpenParams.Lookup reconciles its intent at once: it takes the dead
// intent's lock itself, or for a lease claims it only while the lease is
// still lapsed (so two reconcilers never race, and a renewal that came
// meanwhile wins), claims the intent (bumps its attempt, fencing the
// writer out; a leased intent gets a fresh lease of the reconciler's),
// asks Lookup, and commits (landed) or aborts (absent) it, then opens its
// own; when Lookup cannot tell, the intent stays open and Open returns an
// error matching ErrUnresolved and ErrBusy. A live writer is waited for,
// never reconciled. Sweep and Recover likewise reconcile an intent whose
// writer is gone whatever its age, and never one whose writer is alive
// (reported in SweepReport.Live). Intents with neither a lock key nor a
// lease (written before liveness existed, or opened through a pgx.Tx) are
// reconciled as before: only by Sweep and Recover, once older than
// OlderThan, or by Open once older than OpenParams.RecoverAfter.
//
// How fast a dead writer is noticed with a session lock (the held session
// is given client_connection_check_interval = Config.ClientCheckInterval
// by the statement that inserts the intent; the pool's connection keeps
// it):
//
//	what happened                             the lock is freed
//	process exits or is killed (SIGKILL)      at once: the kernel closes its sockets
//	  while its session is idle
//	process exits or is killed while a        within Config.ClientCheckInterval (1s):
//	  statement of its write runs on the        the server checks the client while the
//	  intent's session (a long compute or       statement runs, cancels it, rolls its
//	  insert)                                   transaction back and ends the session;
//	                                            before PostgreSQL 14 (no
//	                                            client_connection_check_interval) only
//	                                            when the statement ends and the server
//	                                            writes to the dead socket: bound the
//	                                            write's statements with statement_timeout
//	connection closed or reset, backend       at once
//	  terminated, server restarted or
//	  failed over
//	host vanished, network cut (TCP half-open) when the server notices the dead peer:
//	                                           tcp_keepalives_idle + tcp_keepalives_interval
//	                                           * tcp_keepalives_count (server settings;
//	                                           0 means the OS default, about 2 hours on
//	                                           Linux: set e.g. 60, 10, 6 for about 2 minutes),
//	                                           or tcp_user_timeout for unacknowledged data
//	writer alive but stuck                    never: a live writer is never swept
//
// With a lease, whatever happened to the writer (killed, cut off, its host
// gone, its pooler restarted), its intent is taken for dead once its last
// renewal is Config.Lease old: at most Config.Lease after it stopped, and
// an Open waiting for the dataset notices within one more backoff step
// (1s). A writer alive but unable to reach the database for longer than
// the lease loses its intent (its commit is then refused, see Fencing);
// a live writer that renews is never swept.
//
// A pool needs room, with session locks, for one held connection per
// concurrent open intent on top of what Commit, Sweep and the application
// use (WithTx uses two while fn runs); with leases, for the renewals'
// short statements.
//
// A lock key is 64 bits of a hash of the schema and the intent id. Should
// two keys ever collide (with each other or with another application's
// advisory lock), the only consequence is that a dead writer looks alive
// while the other lock is held: its intent then waits for age-based
// recovery, as an intent without liveness does.
//
// # Fencing
//
// The attempt fence makes the ledger itself safe: once a reconciler claimed
// an intent, its writer can neither commit nor abort it. The attempt is
// the lease's epoch: every commit, abort and renewal names the attempt it
// holds, in the statement that makes it, so a writer whose lease was taken
// over has its renewals and its commit refused with an error matching
// ErrFenced (ErrNotOpen once the new holder ended the intent), and a
// ledger commit in the caller's transaction (CommitTx) fails with that
// transaction. On the Postgres catalog the writestrategy Dispatcher swaps
// the table's metadata pointer in that same transaction, so nothing of a
// fenced write becomes visible. A writer whose lease lapsed but was not
// taken over may still commit: no one else acted on the intent.
// With a session lock, Commit runs on the writer's held session, so a
// writer that lost its hold (the session broke, or it called Release) gets
// an error matching ErrLostHold and the intent is left to reconciliation.
//
// What the fence cannot stop is a write made visible outside Postgres (a
// catalog other than the Postgres one: a REST catalog, a SQL catalog in
// another database, Glue, ...): a writer whose session broke while its
// process runs on (a network blip, a database restart), or whose lease
// lapsed, may still commit its Iceberg snapshot after another process
// reconciled (aborted) its intent. Intent.Alive checks the hold in one
// round trip (for a lease it renews it, so a full lease lies ahead); a
// writer calls it, with a short deadline (a half-open connection would
// otherwise make it wait for TCP to give up), right before its catalog
// commit and gives up on an error. The window that remains is the time
// between Alive and the catalog commit (one catalog round trip, which must
// take less than the lease), plus, for a session lock over a vanished
// network path, the time the server takes to notice (see the table above)
// during which the writer is still seen alive. Within that window a
// reconciler may have asked Lookup, found nothing, and aborted the intent
// just before the snapshot lands: the table then holds a snapshot whose
// intent is aborted. The ledger's row count and watermark do not count it;
// readers of the table see it until the next replace overwrites it, and a
// retried append would add its rows again. Keep the window small: call
// Alive last, and set the keepalive settings.
//
// # Crash recovery
//
// A process that dies between the Iceberg commit and the ledger commit
// leaves its intent open. The next Open with a Lookup, Sweep (all datasets)
// and Recover (one dataset) reconcile such intents through the Lookup the
// caller supplies (for Iceberg: "is there a snapshot carrying this
// transaction id in the table's history?"): landed -> committed with the
// found outcome, provably absent -> aborted, cannot tell -> left open and
// reported. A reconciler first claims an intent by bumping its attempt, so
// the original writer, should it still be alive, can no longer commit or
// abort it.
//
// # Idempotency keys
//
// OpenParams.IdempotencyKey is stored on the intent. FindByKey returns the
// newest committed intent of a dataset with a key (an index lookup,
// whatever the dataset's history), so a retried request returns the
// earlier result instead of writing again.
//
// # Maintenance
//
// Lifecycle work on a dataset (snapshot expiry, compaction, orphan
// removal) opens an intent with WriteMode Maintenance, so it never
// races a writer or a reconciliation of the dataset (a maintenance run
// skips a busy dataset with NoWait). Its commit stamps only the dataset's
// maintained_at (Dataset.MaintainedAt) and, from Outcome.Report, its last
// maintenance report (Dataset.Maintenance): never the watermark, row
// count, status, schema or sink, and expectations do not run for it.
// Committed windows and OldestOpen leave maintenance intents out (they
// carry no data). A maintenance intent whose writer is gone is aborted by
// reconciliation without asking Lookup: a maintenance run is idempotent,
// there is nothing to roll forward.
//
// # Schema
//
// Migrate applies the embedded, numbered migrations under an advisory lock;
// it is idempotent and safe to run from several processes at once. The
// schema name is configurable (default "lakewrite"). Migrations returns the
// raw SQL for teams that run their own migration tool. Besides the tables,
// the schema holds iceberg_bucket(value, n), Iceberg's bucket[n] transform
// (Murmur3) for smallint, integer, bigint, date, time, timestamp,
// timestamptz, text and bytea values, which orders a write's rows by bucket
// partition; it needs PostgreSQL 14 or later (SQL-standard function
// bodies).
//
// Errors match sentinels with errors.Is (their messages name the dataset,
// the holding intent or the intent's status): ErrBusy,
// ErrDatasetNotFound (which sink and writestrategy return too),
// ErrIntentNotFound, ErrNotOpen, ErrFenced, ErrVetoed, ErrNotOwner,
// ErrInvalid, ErrLostHold, ErrUnresolved, ErrOutcomeUnknown.
// ErrTransactionPooling is no longer returned: an intent opened through a
// pooler is held by a lease.
package ledger
