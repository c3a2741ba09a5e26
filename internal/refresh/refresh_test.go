package refresh

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSQLBuilders(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `'it''s'`, Literal("it's"))
	assert.Equal(t, `E'a\\b'`, Literal(`a\b`))
	assert.True(t, Canonical([]Col{{"a", "bigint"}, {"b", "text"}, {"c", "character varying(10)"}, {"d", "pg_catalog.int4"}}))
	assert.False(t, Canonical([]Col{{"a", "bigint"}, {"b", "numeric(10,2)"}}))
	assert.False(t, Canonical([]Col{{"a", "timestamp with time zone"}}))
	// The NULL branch only when a key holds a NULL.
	assert.NotContains(t, Cond([]string{"r.a"}, false), "IS NOT DISTINCT FROM")
	assert.Contains(t, Cond([]string{"r.a"}, true), "IS NOT DISTINCT FROM")
	assert.Equal(t, "(r.a = ANY (ARRAY(SELECT DISTINCT a.k0 FROM "+Table+" a WHERE a.k0 IS NOT NULL)))", IndexedCond([]string{"r.a"}, 0, false, ""))
	assert.Contains(t, IndexedCond([]string{"r.a", "r.b"}, 1, false, ""), "(r.a, r.b) IN (SELECT a.k0, a.k1")
	assert.Contains(t, IndexedCond([]string{"r.a", "r.b"}, 1, false, ""), "r.b = ANY (ARRAY(SELECT DISTINCT a.k1 ")
	assert.Contains(t, IndexedCond([]string{"r.a"}, 0, true, ""), "IS NOT DISTINCT FROM")
	// A canonical row-store key compares the stored text, with the
	// dataset as a literal (the partial index's predicate).
	c := RowStoreCond("o'x", []Col{{"k", "bigint"}}, false)
	assert.Contains(t, c, `d.dataset_id = 'o''x'`)
	assert.Contains(t, c, `(d.data ->> 'k') = ANY (ARRAY(SELECT DISTINCT`)
	c2 := RowStoreCond("o", []Col{{"k", "bigint"}, {"j", "text"}}, false)
	assert.Contains(t, c2, `(d.data ->> 'k') = ANY (ARRAY(SELECT DISTINCT`)
	assert.Contains(t, c2, `((d.data ->> 'k'), (d.data ->> 'j')) IN`)
	assert.Contains(t, RowStoreCond("o", []Col{{"k", "numeric"}}, false), `::numeric`)
	assert.True(t, strings.HasSuffix(IndexSQL(`"lw".dataset_rows`, "o'x", []Col{{"k", "bigint"}}), `WHERE dataset_id = 'o''x'`))
	assert.NotEqual(t, IndexName("a", []Col{{"k", "int"}}), IndexName("a", []Col{{"j", "int"}}))
}
