-- lakewrite control-plane schema, version 7: datasets read from a Postgres
-- relation in place.
--
-- Unqualified names, applied with search_path set to the configured schema.

-- A dataset registered over an existing table, view or SELECT (sink
-- 'pg_relation') keeps that relation's text here: readers select from it in
-- their own transaction, nothing is copied. Such a dataset is never written,
-- so a ledger commit (which stamps the writing sink) cannot land on it.
ALTER TABLE datasets ADD COLUMN relation text
    CHECK (relation IS NULL OR (relation <> '' AND sink = 'pg_relation'));
