-- lakewrite control-plane schema, version 4: dataset owners.
--
-- Unqualified names, applied with search_path set to the configured schema.
--
-- The writer id that owns a dataset: when set, only intents of that writer
-- open on it (ledger.Open refuses others with ErrNotOwner), so that, for
-- example, a manual table uploaded by people and a pipeline output of the
-- same id cannot overwrite each other. NULL: any writer (the default, and
-- every dataset registered before this version).
ALTER TABLE datasets ADD COLUMN owner text CHECK (owner <> '');
