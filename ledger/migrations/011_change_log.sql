-- lakewrite control-plane schema, version 11: the change log.
--
-- Unqualified names, applied with search_path set to the configured schema.
-- Package incremental/changelog reads and writes these tables; its doc.go
-- is their contract.

-- The change images of the sources, stamped with the 64-bit id of the
-- transaction that wrote them and read back with snapshot visibility.
-- op: 'I' a new image (a row inserted, or the new version of an updated
-- row), 'D' an old image (a row deleted, or the old version of an updated
-- row), each in image, a jsonb object keyed by column name; 'F' everything
-- may have changed (TRUNCATE, a full rewrite; image NULL). The triggers of
-- a tracked table write their images compactly, up to 1,000 rows an entry:
-- op 'i' (new images) or 'd' (old images), vals a two-dimensional array of
-- the tracked columns' values as text, one row per image, in the order of
-- change_sources.columns. No primary key and one index: every write of a
-- tracked table pays for them.
CREATE TABLE change_log (
    source text NOT NULL,
    xid    xid8 NOT NULL DEFAULT pg_current_xact_id(),
    op     "char" NOT NULL,
    image  jsonb,
    vals   text[]
);

CREATE INDEX change_log_source_xid ON change_log (source, xid);

-- The sources whose writes record change images: a tracked relation
-- (relation, relid and columns set; its triggers call function) or a
-- row-store dataset (relation NULL). signature: the tracked columns'
-- attnum:name:type when tracking was installed, to tell a later ALTER
-- TABLE of them; types: their types, schema-qualified, to read vals back.
-- installed_xid: the transaction that installed (or last re-installed) the
-- recording; a reader whose position does not see it must read the source
-- whole. trimmed_below, trimmed_snapshot: entries with a smaller xid that
-- are visible in that pg_snapshot (text) may have been deleted.
CREATE TABLE change_sources (
    source        text PRIMARY KEY,
    relation      text,
    relid         oid,
    columns       text[],
    function      text,
    signature     text,
    types         text[],
    installed_xid xid8 NOT NULL,
    trimmed_below xid8 NOT NULL DEFAULT '0',
    trimmed_snapshot text,
    installed_at  timestamptz NOT NULL DEFAULT now()
);

-- What an output's last committed run read of each of its sources, written
-- in the transaction that commits the run. position is opaque here.
CREATE TABLE refresh_positions (
    dataset_id text NOT NULL,
    source_id  text NOT NULL,
    position   text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (dataset_id, source_id)
);

CREATE INDEX refresh_positions_source ON refresh_positions (source_id);

-- The clock of the change log: each trim records when it ran and the xmin
-- of its snapshot, so that an entry's age is known without a timestamp per
-- entry (an entry whose xid is below a mark's xid was written before the
-- mark's time).
CREATE TABLE change_log_marks (
    at  timestamptz NOT NULL,
    xid xid8 NOT NULL
);

CREATE INDEX change_log_marks_at ON change_log_marks (at);
