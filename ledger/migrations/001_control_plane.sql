-- lakewrite control-plane schema, version 1.
--
-- Unqualified names: lakewrite applies this file with search_path set to the
-- configured schema (default "lakewrite"). Teams running their own migration
-- tool: CREATE SCHEMA lakewrite; SET search_path TO lakewrite; then run it.

CREATE TABLE datasets (
    id               text PRIMARY KEY CHECK (id <> ''),
    name             text NOT NULL DEFAULT '',
    schema           jsonb,
    row_count        bigint NOT NULL DEFAULT 0 CHECK (row_count >= 0),
    status           text NOT NULL DEFAULT 'pending',
    source_watermark timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- The Postgres row store: one jsonb document per output row.
CREATE TABLE dataset_rows (
    dataset_id text   NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    row_index  bigint NOT NULL,
    data       jsonb  NOT NULL,
    PRIMARY KEY (dataset_id, row_index)
);

-- The write-intent ledger: open -> committed | aborted.
CREATE TABLE pipeline_build_transactions (
    id           uuid PRIMARY KEY,
    dataset_id   text NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    writer_id    text NOT NULL CHECK (writer_id <> ''),
    sink         text NOT NULL CHECK (sink <> ''),
    write_mode   text NOT NULL CHECK (write_mode <> ''),
    status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'committed', 'aborted')),
    row_count    bigint NOT NULL DEFAULT 0 CHECK (row_count >= 0),
    snapshot_id  bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    committed_at timestamptz,
    ended_at     timestamptz,
    error        text,
    -- Fence: bumped whenever a sweeper claims the intent; a commit must carry
    -- the attempt it was opened with.
    attempt      bigint NOT NULL DEFAULT 1,
    CHECK ((status = 'committed') = (committed_at IS NOT NULL))
);

-- At most one open intent per dataset: serializes writers across processes.
CREATE UNIQUE INDEX pipeline_build_transactions_one_open
    ON pipeline_build_transactions (dataset_id) WHERE status = 'open';

-- Delta readers window committed transactions by commit time.
CREATE INDEX pipeline_build_transactions_committed
    ON pipeline_build_transactions (dataset_id, committed_at) WHERE status = 'committed';

-- The sweeper looks for old open intents.
CREATE INDEX pipeline_build_transactions_open_age
    ON pipeline_build_transactions (created_at) WHERE status = 'open';
