-- lakewrite control-plane schema, version 9: shadow mode.
--
-- Unqualified names, applied with search_path set to the configured schema.
--
-- A writer flag may say 'shadow' (ordered pg < shadow < iceberg_native):
-- Postgres stays the sink of record and every write of the dataset also
-- writes its Iceberg table (package writestrategy). shadow_runs records
-- one row per shadow write: what each sink holds after it, and whether
-- they agree.

ALTER TABLE writer_flags DROP CONSTRAINT IF EXISTS writer_flags_default_mode_check;
ALTER TABLE writer_flags DROP CONSTRAINT IF EXISTS writer_flags_max_mode_check;
ALTER TABLE writer_flags DROP CONSTRAINT IF EXISTS writer_flags_check;
ALTER TABLE writer_flags
    ADD CONSTRAINT writer_flags_default_mode_check CHECK (default_mode IN ('pg', 'shadow', 'iceberg_native')),
    ADD CONSTRAINT writer_flags_max_mode_check CHECK (max_mode IN ('pg', 'shadow', 'iceberg_native')),
    -- The default never exceeds the ceiling; package sink checks this
    -- first and returns a typed error.
    ADD CONSTRAINT writer_flags_check CHECK (
        array_position(ARRAY['pg', 'shadow', 'iceberg_native'], default_mode)
        <= array_position(ARRAY['pg', 'shadow', 'iceberg_native'], max_mode));

ALTER TABLE writer_flag_overrides DROP CONSTRAINT IF EXISTS writer_flag_overrides_mode_check;
ALTER TABLE writer_flag_overrides
    ADD CONSTRAINT writer_flag_overrides_mode_check CHECK (mode IN ('pg', 'shadow', 'iceberg_native'));

-- One shadow write of a dataset: txn_id is the ledger transaction of the
-- write of record (on Postgres) whose rows the shadow wrote to Iceberg.
-- status: running (in flight, or its writer died: the next shadow write of
-- the dataset marks it aborted), matched, mismatch, failed, aborted, or
-- superseded (a later write of record came first; nothing was written).
-- The checksums are those of Dispatcher.Verify (rows and two 64-bit sums,
-- stored as their bits in bigint): pg_* of the row store at txn_id,
-- iceberg_* of the snapshot the shadow committed. mismatch lists the
-- columns whose values differ.
CREATE TABLE shadow_runs (
    id               bigserial PRIMARY KEY,
    dataset_id       text NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    txn_id           uuid NOT NULL,
    writer_id        text NOT NULL,
    status           text NOT NULL CHECK (status IN ('running', 'matched', 'mismatch', 'failed', 'aborted', 'superseded')),
    pg_rows          bigint,
    pg_sum           bigint,
    pg_sum2          bigint,
    iceberg_rows     bigint,
    iceberg_sum      bigint,
    iceberg_sum2     bigint,
    snapshot_id      bigint,
    rounded          bigint,
    mismatch         jsonb,
    error            text,
    started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at      timestamptz
);

CREATE INDEX shadow_runs_dataset ON shadow_runs (dataset_id, id);
