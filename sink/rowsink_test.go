package sink_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
)

func decision(writer, dataset string, override, max sink.Sink) sink.Decision {
	return sink.Decide(sink.Setting{WriterID: writer, DatasetID: dataset, WriterKnown: true, Default: sink.Postgres, Max: max, Override: override})
}

// The pure resolution table.
func TestDecide(t *testing.T) {
	t.Parallel()
	pg, ice := sink.Postgres, sink.Iceberg
	cases := []struct {
		name    string
		s       sink.Setting
		want    sink.Sink
		req     sink.Sink
		clamped bool
		source  sink.Source
	}{
		{"default", sink.Setting{WriterKnown: true, Default: pg, Max: ice}, sink.Postgres, pg, false, sink.SourceDefault},
		{"default iceberg", sink.Setting{WriterKnown: true, Default: ice, Max: ice}, sink.Iceberg, ice, false, sink.SourceDefault},
		{"override", sink.Setting{WriterKnown: true, Default: pg, Max: ice, Override: ice}, sink.Iceberg, ice, false, sink.SourceOverride},
		{"override below default", sink.Setting{WriterKnown: true, Default: ice, Max: ice, Override: pg}, sink.Postgres, pg, false, sink.SourceOverride},
		{"override capped", sink.Setting{WriterKnown: true, Default: pg, Max: pg, Override: ice}, sink.Postgres, ice, true, sink.SourceOverride},
		{"default capped", sink.Setting{WriterKnown: true, Default: ice, Max: pg}, sink.Postgres, ice, true, sink.SourceDefault},
		{"unknown writer", sink.Setting{Default: ice, Max: ice, Override: ice}, sink.Postgres, pg, false, sink.SourceUnknownWriter},
		{"invalid flag", sink.Setting{WriterKnown: true, Default: "dual", Max: ice}, sink.Postgres, "dual", true, sink.SourceDefault},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.s.WriterID, c.s.DatasetID = "w", "ds"
			d := sink.Decide(c.s)
			assert.Equal(t, c.want, d.Sink)
			assert.Equal(t, c.req, d.Requested)
			assert.Equal(t, c.clamped, d.Clamped)
			assert.Equal(t, c.source, d.Source)
			assert.NotEmpty(t, d.Reason)
			assert.LessOrEqual(t, d.Sink.Compare(d.Max), 0, "never above the ceiling")
		})
	}
}

func TestRunMissingArm(t *testing.T) {
	t.Parallel()
	called := false
	rs := sink.RowSink[int]{Postgres: func(context.Context) (int, error) { called = true; return 1, nil }}

	d := decision("pipeline.output", "ds", sink.Iceberg, sink.Iceberg)
	_, err := rs.Run(context.Background(), d)
	require.ErrorIs(t, err, sink.ErrMissingArm)
	var me *sink.MissingArmError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, sink.Iceberg, me.Sink)
	assert.Equal(t, "ds", me.DatasetID)
	assert.False(t, called, "no arm runs")

	n, err := rs.Run(context.Background(), decision("pipeline.output", "ds", "", sink.Iceberg))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.True(t, called)
}

func TestRunRefusesBadDecisions(t *testing.T) {
	t.Parallel()
	ran := false
	arm := func(context.Context) (string, error) { ran = true; return "x", nil }
	rs := sink.RowSink[string]{Postgres: arm, Iceberg: arm}
	ctx := context.Background()

	_, err := rs.Run(ctx, sink.Decision{})
	require.ErrorIs(t, err, sink.ErrUnresolved)

	above := decision("w", "ds", sink.Iceberg, sink.Iceberg)
	above.Max = sink.Postgres // hand-edited past its ceiling
	_, err = rs.Run(ctx, above)
	require.ErrorIs(t, err, sink.ErrAboveCeiling)

	mismatched := decision("w", "ds", "", sink.Iceberg)
	mismatched.Sink = "dual" // not a sink
	_, err = rs.Run(ctx, mismatched)
	require.ErrorIs(t, err, sink.ErrUnresolved)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rs.Run(cctx, decision("w", "ds", "", sink.Postgres))
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)

	// Arm errors come back unchanged.
	boom := errors.New("boom")
	rs.Postgres = func(context.Context) (string, error) { return "", boom }
	_, err = rs.Run(ctx, decision("w", "ds", "", sink.Postgres))
	require.Equal(t, boom, err)
}

func TestPair(t *testing.T) {
	t.Parallel()
	ice := func(ds string) sink.Decision {
		return decision("pipeline.output", ds, sink.Iceberg, sink.Iceberg)
	}
	pg := func(ds string) sink.Decision { return decision("pipeline.output", ds, "", sink.Iceberg) }

	p, err := sink.Pair(ice("a"), ice("b"))
	require.NoError(t, err)
	assert.Equal(t, sink.Iceberg, p.Sink)
	p, err = sink.Pair(pg("a"), pg("b"))
	require.NoError(t, err)
	assert.Equal(t, sink.Postgres, p.Sink)
	_, err = sink.Pair(pg("a"), ice("b"))
	require.ErrorIs(t, err, sink.ErrMixedPair)
	_, err = sink.Pair(ice("a"), pg("b"))
	require.ErrorIs(t, err, sink.ErrMixedPair)

	// A pair whose arm is missing fails before work.
	rs := sink.RowSink[int]{Postgres: func(context.Context) (int, error) { return 2, nil }}
	p, err = sink.Pair(ice("a"), ice("b"))
	require.NoError(t, err)
	_, err = rs.RunPair(context.Background(), p)
	require.ErrorIs(t, err, sink.ErrMissingArm)
	// A tampered pair is refused.
	p.Sink = sink.Postgres
	_, err = rs.RunPair(context.Background(), p)
	require.ErrorIs(t, err, sink.ErrUnresolved)
}

func TestSinks(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []sink.Sink{sink.Postgres, sink.Iceberg}, sink.Sinks())
	assert.Equal(t, -1, sink.Postgres.Compare(sink.Iceberg))
	assert.Equal(t, 0, sink.Postgres.Compare(sink.Postgres))
	assert.Equal(t, 1, sink.Iceberg.Compare(sink.Postgres))
	m, err := sink.ParseSink("iceberg_native")
	require.NoError(t, err)
	assert.Equal(t, sink.Iceberg, m)
	assert.Equal(t, "iceberg_native", m.String())
	_, err = sink.ParseSink("ICEBERG")
	require.ErrorIs(t, err, sink.ErrInvalidSink)
	assert.Equal(t, "pg", string(sink.Postgres))
	assert.Equal(t, "iceberg_native", string(sink.Iceberg))
}
