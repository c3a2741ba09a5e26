-- lakewrite control-plane schema, version 8: the Iceberg bucket transform
-- in SQL, so a write can stream its rows clustered by bucket partition
-- (ORDER BY iceberg_bucket(column, N)).
--
-- Unqualified names, applied with search_path set to the configured schema.
-- The wrappers use SQL-standard bodies (PostgreSQL 14+), whose references
-- are bound when they are created, so they work whatever the caller's
-- search_path.
--
-- iceberg_bucket(v, n) = (murmur3_x86_32(bytes(v), seed 0) & 0x7FFFFFFF) % n,
-- as Iceberg's bucket[n] transform: integers (smallint, integer, bigint
-- through the implicit casts) are hashed as 8-byte little-endian longs; a
-- date as its days since 1970-01-01, a time as its microseconds since
-- midnight, a timestamp or timestamptz as its microseconds since the epoch
-- (UTC), all as longs; text as its UTF-8 bytes; bytea as its bytes. NULL
-- gives NULL. The 32-bit arithmetic is done in bigint: every product is
-- split so that nothing exceeds 2^48, and every step is masked to 32 bits.

-- iceberg_bucket of a long: the two 4-byte blocks of its little-endian
-- bytes (low half, then high half), then the length 8.
CREATE FUNCTION iceberg_bucket(v bigint, n integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    k bigint := v & 4294967295;
    h bigint;
BEGIN
    -- block 1: k *= 0xcc9e2d51; k = rotl(k, 15); k *= 0x1b873593
    k := (k * 11601 + ((k * 52382) & 65535) * 65536) & 4294967295;
    k := ((k << 15) | (k >> 17)) & 4294967295;
    k := (k * 13715 + ((k * 7047) & 65535) * 65536) & 4294967295;
    -- h = seed ^ k; h = rotl(h, 13); h = h*5 + 0xe6546b64
    h := ((k << 13) | (k >> 19)) & 4294967295;
    h := (h * 5 + 3864292196) & 4294967295;
    -- block 2
    k := (v >> 32) & 4294967295;
    k := (k * 11601 + ((k * 52382) & 65535) * 65536) & 4294967295;
    k := ((k << 15) | (k >> 17)) & 4294967295;
    k := (k * 13715 + ((k * 7047) & 65535) * 65536) & 4294967295;
    h := h # k;
    h := ((h << 13) | (h >> 19)) & 4294967295;
    h := (h * 5 + 3864292196) & 4294967295;
    -- length, then fmix32: *0x85ebca6b, *0xc2b2ae35
    h := h # 8;
    h := h # (h >> 16);
    h := (h * 51819 + ((h * 34283) & 65535) * 65536) & 4294967295;
    h := h # (h >> 13);
    h := (h * 44597 + ((h * 49842) & 65535) * 65536) & 4294967295;
    h := h # (h >> 16);
    RETURN ((h & 2147483647) % n)::integer;
END
$$;

-- iceberg_bucket of bytes: 4-byte little-endian blocks, then the 1 to 3
-- tail bytes, then the length.
CREATE FUNCTION iceberg_bucket(v bytea, n integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    len integer := length(v);
    blocks integer := len & ~3;
    i integer := 0;
    k bigint;
    h bigint := 0;
BEGIN
    WHILE i < blocks LOOP
        k := get_byte(v, i)::bigint | (get_byte(v, i + 1)::bigint << 8)
             | (get_byte(v, i + 2)::bigint << 16) | (get_byte(v, i + 3)::bigint << 24);
        k := (k * 11601 + ((k * 52382) & 65535) * 65536) & 4294967295;
        k := ((k << 15) | (k >> 17)) & 4294967295;
        k := (k * 13715 + ((k * 7047) & 65535) * 65536) & 4294967295;
        h := h # k;
        h := ((h << 13) | (h >> 19)) & 4294967295;
        h := (h * 5 + 3864292196) & 4294967295;
        i := i + 4;
    END LOOP;
    IF len > blocks THEN
        k := get_byte(v, i)::bigint;
        IF len > blocks + 1 THEN
            k := k | (get_byte(v, i + 1)::bigint << 8);
        END IF;
        IF len > blocks + 2 THEN
            k := k | (get_byte(v, i + 2)::bigint << 16);
        END IF;
        k := (k * 11601 + ((k * 52382) & 65535) * 65536) & 4294967295;
        k := ((k << 15) | (k >> 17)) & 4294967295;
        k := (k * 13715 + ((k * 7047) & 65535) * 65536) & 4294967295;
        h := h # k;
    END IF;
    h := h # len;
    h := h # (h >> 16);
    h := (h * 51819 + ((h * 34283) & 65535) * 65536) & 4294967295;
    h := h # (h >> 13);
    h := (h * 44597 + ((h * 49842) & 65535) * 65536) & 4294967295;
    h := h # (h >> 16);
    RETURN ((h & 2147483647) % n)::integer;
END
$$;

CREATE FUNCTION iceberg_bucket(v text, n integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN iceberg_bucket(convert_to(v, 'UTF8'), n);

CREATE FUNCTION iceberg_bucket(v date, n integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN iceberg_bucket((v - DATE '1970-01-01')::bigint, n);

CREATE FUNCTION iceberg_bucket(v time, n integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN iceberg_bucket((extract(epoch FROM v) * 1000000)::bigint, n);

CREATE FUNCTION iceberg_bucket(v timestamp, n integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN iceberg_bucket((extract(epoch FROM v - TIMESTAMP '1970-01-01 00:00:00') * 1000000)::bigint, n);

CREATE FUNCTION iceberg_bucket(v timestamptz, n integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN iceberg_bucket((extract(epoch FROM v - TIMESTAMPTZ '1970-01-01 00:00:00+00') * 1000000)::bigint, n);
