-- lakewrite control-plane schema, version 6: who asked for a write.
--
-- Unqualified names, applied with search_path set to the configured schema.

-- The identity on whose behalf the intent was opened (a user or service
-- principal, as the embedding service authenticated it), beside writer_id
-- (the code path that writes). NULL: not recorded.
ALTER TABLE pipeline_build_transactions ADD COLUMN actor text CHECK (actor <> '');
