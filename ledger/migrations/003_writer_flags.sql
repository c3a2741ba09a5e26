-- lakewrite control-plane schema, version 3: writer flags (package sink).
--
-- Unqualified names, applied with search_path set to the configured schema.
--
-- A writer id (pipeline.output, sync.*, ingest.api, ...) has one row: the
-- mode its datasets use by default and the highest mode any of its datasets
-- may use. Modes are ordered pg < iceberg_native. Cutover lists are segmented
-- per writer: an override always names its writer.

CREATE TABLE writer_flags (
    writer_id    text PRIMARY KEY CHECK (writer_id <> ''),
    default_mode text NOT NULL CHECK (default_mode IN ('pg', 'iceberg_native')),
    max_mode     text NOT NULL CHECK (max_mode IN ('pg', 'iceberg_native')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- The default never exceeds the ceiling (pg < iceberg_native). Package
    -- sink checks this first and returns a typed error; this is the backstop
    -- for hand-written SQL.
    CHECK (NOT (default_mode = 'iceberg_native' AND max_mode = 'pg'))
);

-- Per-dataset overrides of a writer's default: the canaries. Setting one above
-- the writer's max mode is refused by package sink. Lowering the max mode
-- below existing overrides is allowed (the kill switch); resolution then caps
-- them and reports the decision as clamped.
CREATE TABLE writer_flag_overrides (
    writer_id  text NOT NULL REFERENCES writer_flags (writer_id) ON DELETE CASCADE,
    dataset_id text NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    mode       text NOT NULL CHECK (mode IN ('pg', 'iceberg_native')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (writer_id, dataset_id)
);

CREATE INDEX writer_flag_overrides_dataset ON writer_flag_overrides (dataset_id);
