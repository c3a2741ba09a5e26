package writestrategy

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/sink"
)

// The sink guard: a write must not move a dataset to another sink unless
// the flags of its own writer say so.
//
//   - A writer without a flags row (sink.SourceUnknownWriter, resolved to
//     the safe default Postgres) is refused with a *sink.UnknownWriterError
//     (errors.Is(err, sink.ErrUnknownWriter)), naming the known writers,
//     when an output lives on Iceberg or its last write came from a
//     registered writer: a typo in the writer id would otherwise undo a
//     flip. The first write of a dataset never written (or a dataset only
//     ever written to Postgres by unregistered writers) is allowed: it goes
//     to Postgres, as every write did before any cutover.
//   - A registered writer whose resolved sink differs from where an output
//     lives is a flip or a revert when its own flags explain it: an override
//     for the dataset, or its default with the dataset last written by the
//     same writer (the default changed, an override was cleared, or the max
//     sink clamped it). Otherwise (the writer default of a writer that is not
//     the dataset's last writer) the write goes ahead and is logged at Warn,
//     message "sink change not explained by the writer's flags", with the
//     writer, the dataset, both sinks and the last writer.

// guardSink applies the sink guard to the outputs of w for decision dec
// (for a split pair, the sink both outputs resolved to), from the outputs'
// rows recoverOutputs read into w.datasets.
func (d *Dispatcher) guardSink(ctx context.Context, w *writeInfo, dec sink.Decision) error {
	for _, o := range w.outs {
		lives := w.datasets[o].Sink // a missing row: not registered
		if lives == "" || lives == sink.Relation {
			continue // never written (a relation is refused elsewhere)
		}
		unknown := dec.Source == sink.SourceUnknownWriter
		if !unknown && (lives == dec.Sink || dec.Source != sink.SourceDefault) {
			continue
		}
		if unknown && lives == sink.Postgres && lives == dec.Sink {
			// Only a registered last writer makes this a takeover.
			last, known, err := d.lastWriter(ctx, o)
			if err != nil {
				return err
			}
			if last == "" || last == w.writerID || !contains(known, last) {
				continue
			}
			return &sink.UnknownWriterError{WriterID: w.writerID, DatasetID: o, LivesOn: lives, LastWriter: last, Known: known}
		}
		last, known, err := d.lastWriter(ctx, o)
		if err != nil {
			return err
		}
		if unknown {
			return &sink.UnknownWriterError{WriterID: w.writerID, DatasetID: o, LivesOn: lives, LastWriter: last, Known: known}
		}
		if last == w.writerID {
			continue // the writer's own default changed, or its override was cleared
		}
		d.log.LogAttrs(ctx, slog.LevelWarn, "sink change not explained by the writer's flags",
			slog.String("writer_id", w.writerID), slog.String("dataset_id", o),
			slog.String("from", string(lives)), slog.String("to", string(dec.Sink)),
			slog.String("last_writer", last), slog.String("reason", dec.Reason))
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// lastWriter reads the writer of the last committed write (maintenance
// aside) of dataset id, and the writers with a flags row.
func (d *Dispatcher) lastWriter(ctx context.Context, id string) (last string, known []string, err error) {
	s := pgx.Identifier{d.cfg.Ledger.Schema()}.Sanitize()
	tx, err := poolBegin(ctx, d.db, "")
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	err = tx.QueryRow(ctx, `SELECT coalesce((SELECT writer_id FROM `+s+`.pipeline_build_transactions
			WHERE dataset_id = $1 AND status = 'committed' AND write_mode <> 'maintenance'
			ORDER BY committed_at DESC NULLS LAST LIMIT 1), ''),
		coalesce((SELECT array_agg(writer_id ORDER BY writer_id) FROM `+s+`.writer_flags), '{}')`, id).Scan(&last, &known)
	if err != nil {
		return "", nil, queryError("read the dataset's last writer", err)
	}
	return last, known, nil
}
