// Package sliceriver writes the slices of a sliced write (package
// writestrategy/sliced) in other processes, as River jobs.
//
// A sliced write has three steps: the coordinator plans the slices in the
// transaction that exported its snapshot, each slice is read as of that
// snapshot and written as data files, and the coordinator stages every
// slice's files as one write that commits in one Iceberg snapshot with
// the ledger. Package sliced runs the middle step on goroutines of the
// coordinator's process; this package runs it on River workers, in any
// process that shares the database and the warehouse.
//
// The package is a module of its own,
// github.com/lakewrite/lakewrite/writestrategy/sliced/sliceriver: River,
// and the Go release River needs, stay out of lakewrite's own
// requirements.
//
// # How
//
// Coordinator.Stage, a sliced.StageFunc (give it to
// writestrategy.DispatchConfig.StageSlices), begins the write
// (facade.Facade.BeginSliced), plans the slices (sliced.PlanSlices) and
// enqueues one job per slice (SliceArgs: the write's identity
// facade.SlicedWriteRef, the snapshot id, the slice's range and SQL, the
// write's deadline). The jobs are inserted in a short transaction of their
// own, committed at once: the coordinator's transaction must stay open
// (it holds the snapshot the slices import), and jobs inserted in it would
// stay invisible to the workers until it commits, after the slices.
//
// A Worker (register it with river.AddWorker) resumes the write
// (facade.Facade.ResumeSliced), writes its slice (sliced.WriteSlice) and
// stores the slice's files (facade.SlicedWrite.EncodeSlice) in the results
// table, keyed by (write, slice), in the transaction that completes the
// job (river.JobCompleteTx): a slice has a result exactly when its job
// completed, and at most one result whatever the attempts.
//
// The coordinator polls the results until every slice has one, then
// closes the write's results: in one transaction it marks the write
// closed, reads the results and deletes their rows, under an advisory
// lock that workers take shared to store a result, so that a result is
// either read by the close or refused after it (the late slice then
// deletes its files). It decodes the results
// (facade.SlicedWrite.DecodeSlice) and stages them
// (facade.SlicedWrite.Stage); the caller commits the Staged as it would
// sliced.Stage's. Coordinator.Prune deletes the marks of closed writes.
//
// # Progress
//
// A slice's batches are read in a worker's process, where the
// coordinator's sliced.Config.Wrap cannot see them (WorkerConfig.Wrap
// can, in that process). The coordinator reports each slice once instead,
// when it finds the slice's result: it calls sliced.Config.SliceDone with
// the slice's index and rows, from the goroutine that called Stage. The
// Dispatcher's SliceDone gives its Observer (one with a Progress method)
// a writestrategy.ProgressEvent per slice, Rows all the slice's rows. A
// slice is reported when its job completes, so a write that fails later
// may have reported some of its slices.
//
// # Failure
//
//   - A slice that fails is retried by River up to
//     CoordinatorConfig.MaxAttempts; a slice that cannot succeed (the
//     snapshot is gone, the output is not row-wise, the write's deadline
//     passed) cancels its job at once. Either fails the write
//     (ErrSliceFailed): the other jobs are cancelled, the results closed,
//     the files of the slices written deleted, and nothing is visible.
//   - A worker killed mid-slice leaves its job running until River's
//     rescuer (on the leader client, every 30 seconds) finds it running
//     longer than both the workers' river.Config.RescueStuckJobsAfter and
//     WorkerConfig.Timeout, and retries it. A Worker without a timeout is
//     never rescued: River ignores running jobs whose timeout is negative.
//     The files of the killed attempt are unreferenced files of the table,
//     removed by the lifecycle's orphan pass. Give the timeout some margin
//     over a slice's duration: an attempt that runs longer is cancelled,
//     and a slow slice rescued while alive is written twice, the second
//     result dropped with its files.
//   - A coordinator that dies ends its transaction and with it the
//     snapshot: slices not yet begun fail with sliced.ErrSnapshot and
//     cancel their jobs; nothing was staged, nothing is visible, and the
//     write's ledger intent is reconciled by the next writer. Slices that
//     had imported the snapshot read it to the end and complete: their
//     results stay in the results table (until Coordinator.Prune) and
//     their files are orphans of the table.
//   - The wait is bounded by sliced.Config.Deadline (and the caller's
//     context); a slice still running at the deadline is cancelled.
//
// # Configuration
//
// Every process writes with a facade.Facade of the same configuration
// (catalog, warehouse, naming, layout). Migrate creates River's tables and
// the results table. River's client of the workers' processes needs the
// Worker, and the coordinator any client on the same database (an
// insert-only client does). Each worker process's pool needs a connection
// per concurrent slice, plus River's own.
package sliceriver
