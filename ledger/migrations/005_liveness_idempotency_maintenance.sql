-- lakewrite control-plane schema, version 5: writer liveness, idempotency
-- keys and maintenance runs.
--
-- Unqualified names, applied with search_path set to the configured schema.

-- The key of the session-level advisory lock the writer of an open intent
-- holds for the intent's lifetime (taken on the writer's session before the
-- row is inserted, released when the intent is committed or aborted). While the lock is granted in this database the writer is alive;
-- once its session ends (process killed, connection broken, server
-- restarted) the lock is gone and the intent is reconciled at once, whatever
-- its age. NULL: the intent has no liveness (rows written before this
-- version, or opened through a transaction or with liveness turned off);
-- such intents are reconciled by age only, as before.
ALTER TABLE pipeline_build_transactions ADD COLUMN lock_key bigint;

-- The caller's idempotency key of the request that opened the intent: a
-- retried request finds the earlier committed intent of the same key and
-- writes nothing. NULL: no key.
ALTER TABLE pipeline_build_transactions ADD COLUMN idempotency_key text CHECK (idempotency_key <> '');

-- "The newest committed intent of this dataset with this key" is an index
-- lookup, never a scan of the dataset's history (committed_at last, so the
-- newest is the first entry read backwards).
CREATE INDEX pipeline_build_transactions_idempotency
    ON pipeline_build_transactions (dataset_id, idempotency_key, committed_at) WHERE idempotency_key IS NOT NULL;

-- Maintenance runs (snapshot expiry, compaction, ...) open intents with
-- write_mode 'maintenance', so they never race a writer of the dataset.
-- Nothing constrains write_mode beyond being non-empty, so no constraint
-- changes. A committed maintenance intent stamps only these two columns,
-- never the dataset's watermark, row count, status, schema or sink:
-- the time of the last maintenance run, and its report (JSON, as the caller
-- passed it; NULL until a run reports one).
ALTER TABLE datasets ADD COLUMN maintained_at timestamptz;
ALTER TABLE datasets ADD COLUMN maintenance jsonb;
