-- lakewrite control-plane schema, version 12: the change log's compact
-- entries compressed with lz4.
--
-- The triggers of a tracked table now write their images column by column:
-- op 'n' (new images) or 'o' (old images), vals a two-dimensional array with
-- one row per tracked column (in the order of change_sources.columns), that
-- column's values as text, up to 100,000 images an entry. Entries of op 'i'
-- and 'd' (one row per image, up to 1,000 an entry), written by triggers
-- installed before, stay valid and are read alike.
--
-- Such an entry is tens of kilobytes, stored out of line and compressed;
-- lz4 compresses it several times faster than the default pglz, which a
-- tracked table's writers pay for at every statement. A server built
-- without lz4 keeps pglz.
DO $lw$
BEGIN
    ALTER TABLE change_log ALTER COLUMN vals SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END
$lw$;
