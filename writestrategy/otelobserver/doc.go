// Package otelobserver is a writestrategy.Observer that makes
// OpenTelemetry spans and metrics of the Dispatcher's writes. It is a
// package of its own so that a service that does not use OpenTelemetry
// does not import it; no other lakewrite package imports OpenTelemetry.
//
// Wire it through the Dispatcher's configuration, with the service's
// providers:
//
//	obs, err := otelobserver.New(&otelobserver.Config{TracerProvider: tp, MeterProvider: mp})
//	...
//	d, err := writestrategy.NewDispatcher(pool, &writestrategy.DispatchConfig{..., Observer: obs})
//
// A nil provider is a no-op one: the Observer never reads the global
// providers of package otel (pass otel.GetTracerProvider() to use them).
// It keeps no state between writes, starts no goroutine and is safe for
// concurrent Writes.
//
// # Spans
//
// Each Dispatcher.Write is one span, "lakewrite.write", a child of the
// span in the context given to Write (so a write joins the trace of the
// request or job that made it). Under it, one "lakewrite.output" span per
// output (two for a split pair), from the start of the write to its end.
// Each phase of the write (writestrategy.Phase) is a span named
// "lakewrite.<phase>": "lakewrite.resolve", "lakewrite.open",
// "lakewrite.apply" or "lakewrite.compute", "lakewrite.stream",
// "lakewrite.check", "lakewrite.catalog_commit", "lakewrite.ledger_commit",
// "lakewrite.maintain". A phase that concerns one output (a stream, the
// commit of one table, its maintenance; every phase of a write of one
// output) is a child of that output's span; a phase that concerns both
// outputs of a split pair is a child of the write's span. The phase's
// context carries its span, so the database and catalog calls it makes
// (traced by otelpgx, for example) nest under it.
//
// Attributes (the Attr constants): the write's span has
// lakewrite.writer_id, lakewrite.dataset_ids, lakewrite.strategy,
// lakewrite.read_mode (the requested one: "snapshot" or "delta"),
// lakewrite.sink (once resolved), lakewrite.rows and lakewrite.bytes (of
// every output). An output's span has lakewrite.dataset_id and, once the
// write succeeded, lakewrite.sink, lakewrite.write_mode ("replace",
// "append"), lakewrite.merge_mode (facade.MergeMode: "position_deletes",
// "deletion_vectors", "copy_on_write", or "none"), lakewrite.rows,
// lakewrite.bytes (of the Iceberg data files added; 0 on the Postgres
// sink), lakewrite.skipped, lakewrite.preserved, lakewrite.txn_id,
// lakewrite.snapshot_id (Iceberg), lakewrite.replayed, and
// lakewrite.full_read when a delta read some sources whole. A phase's span
// has lakewrite.phase, lakewrite.writer_id, lakewrite.dataset_ids,
// lakewrite.sink and lakewrite.rows.
//
// A failed phase and the failed write record the error (an exception
// event), set the span's status to Error and its error.type attribute to
// the error's kind (ErrorKind: "conflict", "commit_state_unknown",
// "server_timeout", "connection_lost", "sink_changed", "query", ...);
// the outputs of a failed write get the status and error.type too.
//
// # Metrics
//
//	lakewrite.write.rows            counter {row}   rows of committed outputs
//	lakewrite.write.bytes           counter By      bytes of the Iceberg data files they added
//	lakewrite.write.duration        histogram s     Dispatcher.Write calls
//	lakewrite.write.phase.duration  histogram s     their phases
//	lakewrite.write.errors          counter {error} failed writes, and failed maintenance after a write
//
// Rows and bytes carry lakewrite.sink, lakewrite.strategy,
// lakewrite.write_mode and lakewrite.merge_mode, and count each output
// once, when it commits (a result replayed for an idempotency key is not
// counted again). The write duration carries lakewrite.sink,
// lakewrite.strategy and lakewrite.read_mode; the phase duration
// lakewrite.phase and lakewrite.sink; both carry error.type when the write
// or phase failed. Errors carry error.type, lakewrite.phase (the phase the
// write failed in: "write" when it failed outside every phase),
// lakewrite.sink and lakewrite.strategy. Metrics carry no dataset or
// writer id, so their cardinality stays bounded whatever the number of
// datasets; the spans carry both.
package otelobserver
