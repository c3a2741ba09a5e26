package sink

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decision(writer, dataset string, override, max Sink) Decision {
	return Decide(Setting{WriterID: writer, DatasetID: dataset, WriterKnown: true, Default: Postgres, Max: max, Override: override})
}

// The pure resolution table.
func TestDecide(t *testing.T) {
	t.Parallel()
	pg, ice := Postgres, Iceberg
	cases := []struct {
		name    string
		s       Setting
		want    Sink
		req     Sink
		clamped bool
		source  Source
	}{
		{"default", Setting{WriterKnown: true, Default: pg, Max: ice}, Postgres, pg, false, SourceDefault},
		{"default iceberg", Setting{WriterKnown: true, Default: ice, Max: ice}, Iceberg, ice, false, SourceDefault},
		{"override", Setting{WriterKnown: true, Default: pg, Max: ice, Override: ice}, Iceberg, ice, false, SourceOverride},
		{"override below default", Setting{WriterKnown: true, Default: ice, Max: ice, Override: pg}, Postgres, pg, false, SourceOverride},
		{"override capped", Setting{WriterKnown: true, Default: pg, Max: pg, Override: ice}, Postgres, ice, true, SourceOverride},
		{"default capped", Setting{WriterKnown: true, Default: ice, Max: pg}, Postgres, ice, true, SourceDefault},
		{"unknown writer", Setting{Default: ice, Max: ice, Override: ice}, Postgres, pg, false, SourceUnknownWriter},
		{"invalid flag", Setting{WriterKnown: true, Default: "dual", Max: ice}, Postgres, "dual", true, SourceDefault},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.s.WriterID, c.s.DatasetID = "w", "ds"
			d := Decide(c.s)
			assert.Equal(t, c.want, d.Sink)
			assert.Equal(t, c.req, d.requested)
			assert.Equal(t, c.clamped, d.Clamped)
			assert.Equal(t, c.source, d.Source)
			assert.NotEmpty(t, d.Reason)
			assert.LessOrEqual(t, d.Sink.Compare(d.max), 0, "never above the ceiling")
		})
	}
}

func TestRunMissingArm(t *testing.T) {
	t.Parallel()
	called := false
	rs := RowSink[int]{Postgres: func(context.Context) (int, error) { called = true; return 1, nil }}

	d := decision("pipeline.output", "ds", Iceberg, Iceberg)
	_, err := rs.Run(context.Background(), d)
	require.ErrorIs(t, err, ErrMissingArm)
	assert.Contains(t, err.Error(), `dataset "ds" resolved to sink iceberg_native but the RowSink has no iceberg_native arm`)
	assert.False(t, called, "no arm runs")

	n, err := rs.Run(context.Background(), decision("pipeline.output", "ds", "", Iceberg))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.True(t, called)
}

func TestRunRefusesBadDecisions(t *testing.T) {
	t.Parallel()
	ran := false
	arm := func(context.Context) (string, error) { ran = true; return "x", nil }
	rs := RowSink[string]{Postgres: arm, Iceberg: arm}
	ctx := context.Background()

	_, err := rs.Run(ctx, Decision{})
	require.ErrorIs(t, err, errUnresolved)

	above := decision("w", "ds", Iceberg, Iceberg)
	above.max = Postgres // hand-edited past its ceiling
	_, err = rs.Run(ctx, above)
	require.ErrorIs(t, err, ErrAboveCeiling)

	mismatched := decision("w", "ds", "", Iceberg)
	mismatched.Sink = "dual" // not a sink
	_, err = rs.Run(ctx, mismatched)
	require.ErrorIs(t, err, errUnresolved)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rs.Run(cctx, decision("w", "ds", "", Postgres))
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)

	// Arm errors come back unchanged.
	boom := errors.New("boom")
	rs.Postgres = func(context.Context) (string, error) { return "", boom }
	_, err = rs.Run(ctx, decision("w", "ds", "", Postgres))
	require.Equal(t, boom, err)
}

func TestPair(t *testing.T) {
	t.Parallel()
	ice := func(ds string) Decision {
		return decision("pipeline.output", ds, Iceberg, Iceberg)
	}
	pg := func(ds string) Decision { return decision("pipeline.output", ds, "", Iceberg) }

	p, err := pair(ice("a"), ice("b"))
	require.NoError(t, err)
	assert.Equal(t, Iceberg, p.sink)
	p, err = pair(pg("a"), pg("b"))
	require.NoError(t, err)
	assert.Equal(t, Postgres, p.sink)
	_, err = pair(pg("a"), ice("b"))
	require.ErrorIs(t, err, ErrMixedPair)
	_, err = pair(ice("a"), pg("b"))
	require.ErrorIs(t, err, ErrMixedPair)

	// A pair whose arm is missing fails before work.
	rs := RowSink[int]{Postgres: func(context.Context) (int, error) { return 2, nil }}
	p, err = pair(ice("a"), ice("b"))
	require.NoError(t, err)
	_, err = rs.RunPair(context.Background(), p)
	require.ErrorIs(t, err, ErrMissingArm)
	// A tampered pair is refused.
	p.sink = Postgres
	_, err = rs.RunPair(context.Background(), p)
	require.ErrorIs(t, err, errUnresolved)
}

func TestSinks(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []Sink{Postgres, Iceberg}, sinks())
	assert.Equal(t, -1, Postgres.Compare(Iceberg))
	assert.Equal(t, 0, Postgres.Compare(Postgres))
	assert.Equal(t, 1, Iceberg.Compare(Postgres))
	m, err := ParseSink("iceberg_native")
	require.NoError(t, err)
	assert.Equal(t, Iceberg, m)
	assert.Equal(t, "iceberg_native", m.String())
	_, err = ParseSink("ICEBERG")
	require.ErrorIs(t, err, errInvalidSink)
	assert.Equal(t, "pg", string(Postgres))
	assert.Equal(t, "iceberg_native", string(Iceberg))
}
