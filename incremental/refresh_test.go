package incremental_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lakewrite/lakewrite/incremental"
	"github.com/lakewrite/lakewrite/sink"
)

func TestChooseRefresh(t *testing.T) {
	t.Parallel()
	src := func(id string, mapped, known bool, changes, rows int64) incremental.RefreshSource {
		return incremental.RefreshSource{ID: id, Mapped: mapped, Known: known, Changes: changes, Rows: rows}
	}
	onPG := func(srcs ...incremental.RefreshSource) incremental.RefreshFacts {
		return incremental.RefreshFacts{Declared: true, Sink: sink.Postgres, Previous: sink.Postgres, Sources: srcs}
	}
	unknown := src("a", true, false, 0, 10)
	unknown.Reason = "a TRUNCATE or full rewrite"
	shared := onPG(src("a", true, true, 40, 100))
	shared.MaxShare = 0.5
	altered := onPG(src("a", true, true, 0, 10))
	altered.Altered = "another write of it since"
	cases := []struct {
		name string
		f    incremental.RefreshFacts
		want incremental.RefreshMode
	}{
		{"no declaration", incremental.RefreshFacts{Sink: sink.Postgres, Previous: sink.Postgres}, ""},
		{"first run", incremental.RefreshFacts{Declared: true, Sink: sink.Iceberg}, incremental.RefreshFull},
		{"flip", incremental.RefreshFacts{Declared: true, Sink: sink.Iceberg, Previous: sink.Postgres}, incremental.RefreshFull},
		{"nothing changed", onPG(src("a", true, true, 0, 10)), incremental.RefreshIncremental},
		{"no sources", onPG(), incremental.RefreshIncremental},
		{"small change", onPG(src("a", true, true, 2, 100)), incremental.RefreshIncremental},
		{"at the share", onPG(src("a", true, true, 20, 100)), incremental.RefreshIncremental},
		{"above the share", onPG(src("a", true, true, 21, 100)), incremental.RefreshFull},
		{"own share", shared, incremental.RefreshIncremental},
		{"change of an empty source", onPG(src("a", true, true, 1, 0)), incremental.RefreshFull},
		{"unknown window", onPG(unknown), incremental.RefreshFull},
		{"unknown window of an unchanged, unmapped source", onPG(src("a", true, true, 1, 100), src("b", false, false, 0, 5)), incremental.RefreshFull},
		{"unmapped source unchanged", onPG(src("a", true, true, 1, 100), src("b", false, true, 0, 5)), incremental.RefreshIncremental},
		{"unmapped source changed", onPG(src("a", true, true, 1, 100), src("b", false, true, 1, 500)), incremental.RefreshFull},
		{"output altered", altered, incremental.RefreshFull},
		{"on Iceberg", incremental.RefreshFacts{Declared: true, Sink: sink.Iceberg, Previous: sink.Iceberg, Sources: []incremental.RefreshSource{src("a", true, true, 3, 100)}}, incremental.RefreshIncremental},
	}
	for _, c := range cases {
		got, why := incremental.ChooseRefresh(c.f)
		assert.Equal(t, c.want, got, c.name)
		assert.Equal(t, got == incremental.RefreshFull, why != "", "%s: a full run says why (%q)", c.name, why)
	}
	_, why := incremental.ChooseRefresh(onPG(unknown))
	assert.Contains(t, why, "a TRUNCATE or full rewrite")
	_, why = incremental.ChooseRefresh(altered)
	assert.Equal(t, "another write of it since", why)
}

func TestDependencyValidate(t *testing.T) {
	t.Parallel()
	out := []string{"k", "total"}
	srcs := map[string][]string{"orders": {"customer", "amount"}, "customers": {"id", "name"}}
	ok := &incremental.Dependency{Key: []string{"k"}, Sources: map[string][]string{"orders": {"customer"}, "customers": {"id"}}}
	assert.NoError(t, ok.Validate(out, srcs))
	assert.NoError(t, (*incremental.Dependency)(nil).Validate(out, srcs))
	assert.NoError(t, (&incremental.Dependency{Key: []string{"nope"}}).Validate(nil, nil), "unknown output columns are not checked")
	bad := []*incremental.Dependency{
		{},
		{Key: []string{"k", "k"}},
		{Key: []string{"missing"}},
		{Key: []string{"k"}, MaxShare: 1.5},
		{Key: []string{"k"}, MaxShare: -0.1},
		{Key: []string{"k"}, Sources: map[string][]string{"elsewhere": {"id"}}},
		{Key: []string{"k"}, Sources: map[string][]string{"orders": {"customer", "amount"}}},
		{Key: []string{"k"}, Sources: map[string][]string{"orders": {"nope"}}},
	}
	for i, d := range bad {
		err := d.Validate(out, srcs)
		assert.True(t, errors.Is(err, incremental.ErrInvalidDependency), "case %d: %v", i, err)
	}
	assert.Equal(t, incremental.DefaultMaxShare, (&incremental.Dependency{}).Share())
	assert.Equal(t, 0.5, (&incremental.Dependency{MaxShare: 0.5}).Share())
}
