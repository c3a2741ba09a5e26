package writestrategy_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A typo in the writer id cannot undo a flip: an unknown writer is refused
// for a dataset living on Iceberg or last written by a registered writer,
// naming the known writers, and nothing moves. A new dataset may still be
// written by an unknown writer (to Postgres); a flip and a revert by the
// dataset's own writer work and log no warning; a registered writer whose
// default moves another writer's dataset is logged at Warn.
func TestDispatchSinkGuard(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	seedWorld(t, w, 20)
	ctx := context.Background()
	var logs syncBuffer
	d, err := writestrategy.NewDispatcher(w.pool, &writestrategy.DispatchConfig{Ledger: w.ledger, Resolver: w.resolver, Lakehouse: w.lake,
		Workspace: "test", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	write := func(writerID, out string) ([]writestrategy.WriteResult, error) {
		w.resolver.Invalidate() // the flags are read with the output's row
		return d.Write(ctx, writestrategy.Request{WriterID: writerID, Strategy: writestrategy.Transform{Output: out, Source: "orders",
			Steps: []writestrategy.Step{{Name: "f", SQL: `SELECT id, name FROM source`}}}})
	}
	lives := func(id string) sink.Sink {
		ds, err := w.ledger.Dataset(ctx, id)
		require.NoError(t, err)
		return ds.Sink
	}
	const typo = "pipeline.ouput"
	ensureOutputs(t, w.pool, "flipped", "onpg")
	w.iceberg("flipped")
	for _, out := range []string{"flipped", "onpg"} {
		for range 2 { // a first write and a rewrite
			_, err := write(writer, out)
			require.NoError(t, err)
		}
	}
	require.Equal(t, sink.Iceberg, lives("flipped"))
	require.Equal(t, sink.Postgres, lives("onpg"))

	for _, out := range []string{"flipped", "onpg"} {
		before := lives(out)
		for range 2 {
			_, err := write(typo, out)
			require.ErrorIs(t, err, sink.ErrUnknownWriter, out)
			var uw *sink.UnknownWriterError
			require.True(t, errors.As(err, &uw))
			require.Equal(t, typo, uw.WriterID)
			require.Equal(t, out, uw.DatasetID)
			require.Equal(t, before, uw.LivesOn)
			require.Equal(t, writer, uw.LastWriter)
			require.Contains(t, uw.Known, writer)
			require.ErrorContains(t, err, `known writers: pipeline.output`)
			require.Equal(t, before, lives(out), "nothing moved")
			_, open, err := w.ledger.OldestOpen(ctx, out)
			require.NoError(t, err)
			require.False(t, open, "no intent left open")
		}
	}

	// A new dataset by an unknown writer: the safe default, as before.
	ensureOutputs(t, w.pool, "fresh")
	for range 2 {
		res, err := write(typo, "fresh")
		require.NoError(t, err)
		require.Equal(t, sink.Postgres, res[0].Sink)
	}

	// The dataset's own writer flips it and reverts it: no warning.
	w.iceberg("onpg")
	res, err := write(writer, "onpg")
	require.NoError(t, err)
	require.Equal(t, sink.Iceberg, res[0].Sink)
	_, err = w.flags.ClearOverride(ctx, writer, "onpg")
	require.NoError(t, err)
	res, err = write(writer, "onpg")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, res[0].Sink)
	require.Empty(t, logs.String())

	// Another registered writer's default moves the flipped dataset: it is
	// written, and logged at Warn with the dataset and both sinks.
	require.NoError(t, w.flags.SetWriter(ctx, sink.WriterFlags{WriterID: "sync.other", Default: sink.Postgres, Max: sink.Iceberg}))
	res, err = write("sync.other", "flipped")
	require.NoError(t, err)
	require.Equal(t, sink.Postgres, res[0].Sink)
	require.Contains(t, logs.String(), `level=WARN msg="sink change not explained by the writer's flags" writer_id=sync.other dataset_id=flipped from=iceberg_native to=pg last_writer=pipeline.output`)
}
