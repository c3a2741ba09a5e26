package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and failed (parity mismatch, refused flag, database error)
	exitUsage   = 2 // bad command line
	usageHeader = `usage: canary <command> [flags] [dataset]

commands:
  init                 migrate the schema, register the pipeline.output flags, seed the demo
  check  <dataset>     show the writer flags and the sink decision for a dataset
                       (and, for a known output, the Iceberg preflight)
  shadow <dataset>     put the dataset in shadow: Postgres stays the sink of record, every
                       write also writes the Iceberg table and records parity
  status [dataset]     mode, consecutive matching shadow runs, first and last run, last mismatch
                       (every known output without a dataset)
  promote <dataset>    make Iceberg the sink of record (one transaction), when the table
                       holds the latest write of record
  drain  <dataset>     delete a promoted dataset's stale row-store rows
  set    <dataset>     set the dataset's override (default iceberg_native; -sink to choose)
  deploy <output>      re-run a known output through the write dispatch
  verify <output>      preflight, then parity: Postgres compute vs the Iceberg table (rows + checksum)
  revert <dataset>     clear the dataset's override (from shadow: stop shadowing; from promoted:
                       back to Postgres, rebuilt in full by its next write)
  intents              list open intents: age, holder liveness, what the next write does with each
  drop   <dataset>     decommission a dataset: Iceberg table and files, overrides, ledger rows

known outputs: %s

flags (every command):
`
)

// usageError is a bad command line; run exits with exitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// ParityError is verify's failure: the Postgres compute and the Iceberg
// table differ (or there is no Iceberg table to compare with).
type ParityError struct {
	Output   string
	Postgres facade.Checksum
	Iceberg  facade.Checksum
}

func (e *ParityError) Error() string {
	return fmt.Sprintf("parity FAILED for %s: rows postgres=%d iceberg=%d; checksum postgres=%s iceberg=%s",
		e.Output, e.Postgres.Rows, e.Iceberg.Rows, e.Postgres, e.Iceberg)
}

type command struct {
	name string
	// arg names the positional argument ("" for none).
	arg string
	// optional: the argument may be left out.
	optional bool
	fn       func(ctx context.Context, c *cli, arg string) error
}

// cli is one invocation: its flags and outputs. No state outlives run.
type cli struct {
	stdout, stderr io.Writer
	databaseURL    string
	warehouse      string
	verbose        bool
	sink           string // set only
	env            *env
}

func (c *cli) printf(format string, args ...any) { fmt.Fprintf(c.stdout, format, args...) }

func commands() []command {
	return []command{
		{name: "init", fn: cmdInit},
		{name: "check", arg: "dataset", fn: cmdCheck},
		{name: "shadow", arg: "dataset", fn: cmdShadow},
		{name: "status", arg: "dataset", optional: true, fn: cmdStatus},
		{name: "promote", arg: "dataset", fn: cmdPromote},
		{name: "drain", arg: "dataset", fn: cmdDrain},
		{name: "set", arg: "dataset", fn: cmdSet},
		{name: "deploy", arg: "output", fn: cmdDeploy},
		{name: "verify", arg: "output", fn: cmdVerify},
		{name: "revert", arg: "dataset", fn: cmdRevert},
		{name: "intents", fn: cmdIntents},
		{name: "drop", arg: "dataset", fn: cmdDrop},
	}
}

// run executes one command line (without the program name) and returns the
// process exit code: 0 success, 1 failure, 2 usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("canary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The default is read after parsing: a flag default is printed by -h,
	// and a URL may hold a password.
	fs.StringVar(&c.databaseURL, "database-url", "", "Postgres URL of the ledger, flags, row store and Iceberg SQL catalog (default $DATABASE_URL; required)")
	fs.StringVar(&c.warehouse, "warehouse", "./lakewrite-data", "warehouse directory of the Iceberg tables; use the same one for every command")
	fs.BoolVar(&c.verbose, "v", false, "log the library's records (sink decisions, intents) to stderr")
	fs.StringVar(&c.sink, "sink", string(sink.Iceberg), "set: the override sink (pg, shadow or iceberg_native)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, usageHeader, strings.Join(outputNames(), ", "))
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		fs.Usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var cmd *command
	for _, k := range commands() {
		if k.name == args[0] {
			cmd = &k
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "canary: unknown command %q\n", args[0])
		fs.Usage()
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if c.databaseURL == "" {
		c.databaseURL = os.Getenv("DATABASE_URL")
	}
	var arg string
	switch {
	case cmd.arg == "" && fs.NArg() > 0:
		fmt.Fprintf(stderr, "canary %s: takes no arguments\n", cmd.name)
		return exitUsage
	case cmd.arg != "" && (fs.NArg() > 1 || fs.NArg() == 0 && !cmd.optional):
		fmt.Fprintf(stderr, "canary %s: needs exactly one <%s>\n", cmd.name, cmd.arg)
		return exitUsage
	case cmd.arg != "" && fs.NArg() == 1:
		arg = fs.Arg(0)
	}

	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	env, err := openEnv(ctx, envOptions{databaseURL: c.databaseURL, warehouse: c.warehouse, logger: logger, migrate: cmd.name == "init"})
	if err == nil {
		c.env = env
		defer env.close()
		err = cmd.fn(ctx, c, arg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "canary %s: %v\n", cmd.name, err)
		var ue *usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

// cmdInit migrates the schema, registers the writer flags and seeds the demo.
func cmdInit(ctx context.Context, c *cli, _ string) error {
	e := c.env
	c.printf("schema %s: migrated\n", e.ledger.Schema())
	w, err := e.flags.Writer(ctx, writerID)
	switch {
	case errors.Is(err, sink.ErrUnknownWriter):
		w = sink.WriterFlags{WriterID: writerID, Default: sink.Postgres, Max: sink.Iceberg}
		if err := e.flags.SetWriter(ctx, w); err != nil {
			return err
		}
		c.printf("writer %s: registered default=%s max=%s\n", writerID, w.Default, w.Max)
	case err != nil:
		return err
	default:
		// Never overwrite existing flags: a lowered max may be a kill switch.
		c.printf("writer %s: already registered default=%s max=%s (left unchanged)\n", writerID, w.Default, w.Max)
	}
	seeded, err := seedSource(ctx, e.pool, e.ledger)
	if err != nil {
		return err
	}
	ds, err := e.ledger.Dataset(ctx, demoSource)
	if err != nil {
		return err
	}
	if seeded {
		c.printf("source %s: seeded rows=%d sink=%s\n", demoSource, ds.RowCount, ds.Sink)
	} else {
		c.printf("source %s: already seeded rows=%d sink=%s (left unchanged)\n", demoSource, ds.RowCount, ds.Sink)
	}
	for _, name := range outputNames() {
		if _, err := e.ledger.EnsureDataset(ctx, name, name, nil); err != nil {
			return err
		}
		c.printf("output %s: registered (%s of %s)\n", name, outputs()[name].Kind(), strings.Join(outputs()[name].Sources(), ", "))
	}
	c.printf("next: canary check %s\n", demoOutput)
	return nil
}

// cmdCheck prints the writer flags, the override and the decision for a
// dataset, all from one read of the flags, plus where its contents live.
func cmdCheck(ctx context.Context, c *cli, datasetID string) error {
	e := c.env
	ds, err := e.ledger.Dataset(ctx, datasetID)
	if err != nil {
		return err
	}
	settings, err := e.flags.Lookup(ctx, writerID, datasetID)
	if err != nil {
		return err
	}
	s := settings[0]
	if s.WriterKnown {
		c.printf("writer %s: default=%s max=%s\n", writerID, s.Default, s.Max)
	} else {
		c.printf("writer %s: not registered (run canary init)\n", writerID)
	}
	override := string(s.Override)
	if override == "" {
		override = "none"
	}
	c.printf("override %s: %s\n", datasetID, override)
	printDecision(c, sink.Decide(s))
	printContents(c, ds)
	if out, ok := outputs()[datasetID]; ok {
		return printPreflight(ctx, c, out)
	}
	return nil
}

// printPreflight runs the Iceberg preflight of a known output
// (writestrategy.Preflight, in a transaction that is rolled back) and
// prints the columns an Iceberg write would round or refuse.
func printPreflight(ctx context.Context, c *cli, s writestrategy.WriteStrategy) error {
	issues, err := preflight(ctx, c.env, s)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if len(issues) == 0 {
		c.printf("preflight: every value fits its Iceberg type exactly\n")
		return nil
	}
	var refused, rounded bool
	for _, is := range issues {
		level := "note"
		if is.Refused > 0 {
			level, refused = "WARNING", true
		}
		rounded = rounded || is.Rounded > 0
		c.printf("preflight %s: %s %s\n", level, is.DatasetID, is.ColumnIssue)
	}
	if rounded {
		c.printf("preflight: rounded values are written rounded half-even to the column's scale (verify compares at that scale); a strict writer (cursor.NumericStrict) refuses them\n")
	}
	if refused {
		c.printf("preflight: an Iceberg write of this output fails at the first refused value: fix or cast those values before the flip\n")
	}
	return nil
}

// preflight is writestrategy.Preflight with the dispatcher's defaults, in a
// transaction that is rolled back (a native source is hydrated into a
// temporary table of it).
func preflight(ctx context.Context, e *env, s writestrategy.WriteStrategy) ([]writestrategy.ColumnIssue, error) {
	tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return writestrategy.Preflight(ctx, tx, &writestrategy.Env{Lakehouse: e.lake}, s, nil)
}

func printDecision(c *cli, d sink.Decision) {
	c.printf("decision: sink=%s source=%s clamped=%t\n", d.Sink, d.Source, d.Clamped)
	c.printf("reason: %s\n", d.Reason)
}

func printContents(c *cli, ds ledger.Dataset) {
	if ds.Sink == "" {
		c.printf("contents: none yet (never deployed)\n")
		return
	}
	c.printf("contents: sink=%s rows=%d watermark=%s\n", ds.Sink, ds.RowCount, ds.SourceWatermark.UTC().Format("2006-01-02T15:04:05.000Z"))
}

// cmdSet sets the dataset's override (the canary flip).
func cmdSet(ctx context.Context, c *cli, datasetID string) error {
	e := c.env
	s, err := sink.ParseSink(c.sink)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("-sink: %v", err)}
	}
	if err := e.flags.SetOverride(ctx, writerID, s, datasetID); err != nil {
		return err
	}
	c.printf("override %s: set to %s for writer %s\n", datasetID, s, writerID)
	d, err := e.flags.Check(ctx, writerID, datasetID)
	if err != nil {
		return err
	}
	printDecision(c, d)
	c.printf("running writers observe the change within their resolver TTL (at most %s)\n", sink.MaxTTL)
	if _, ok := outputs()[datasetID]; ok {
		c.printf("next: canary deploy %s\n", datasetID)
	}
	return nil
}

// cmdDeploy re-runs a known output through the write dispatch, which
// resolves the sink from the flags.
func cmdDeploy(ctx context.Context, c *cli, name string) error {
	s, err := knownOutput(name)
	if err != nil {
		return err
	}
	res, err := c.env.dispatcher.Write(ctx, writestrategy.Request{WriterID: writerID, Strategy: s})
	if err != nil {
		return err
	}
	for _, r := range res {
		c.printf("deployed %s: sink=%s mode=%s rows=%d txn=%s", r.DatasetID, r.Sink, r.Mode, r.Rows, r.TxnID)
		if r.SnapshotID != 0 {
			c.printf(" snapshot=%d", r.SnapshotID)
		}
		c.printf(" committed_at=%s\n", r.CommittedAt.UTC().Format("2006-01-02T15:04:05.000Z"))
		if r.Sink == sink.Iceberg {
			c.printf("next: canary verify %s\n", r.DatasetID)
		}
	}
	return nil
}

// cmdVerify compares the output as Postgres computes it now with the current
// snapshot of its Iceberg table: row count and order-independent checksum.
func cmdVerify(ctx context.Context, c *cli, name string) error {
	e := c.env
	s, err := knownOutput(name)
	if err != nil {
		return err
	}
	ds, err := e.ledger.Dataset(ctx, name)
	if err != nil {
		return err
	}
	if err := printPreflight(ctx, c, s); err != nil {
		return err
	}
	// The fresh compute of the output (the same SELECT both sinks write),
	// and its current contents when they live in the Iceberg table.
	ps, err := e.dispatcher.Verify(ctx, writestrategy.Request{Strategy: s})
	if err != nil {
		return err
	}
	if len(ps) != 1 {
		return fmt.Errorf("output computes %d datasets; verify handles one", len(ps))
	}
	pg := ps[0].Computed
	c.printf("postgres compute: rows=%d checksum=%s\n", pg.Rows, pg)
	ice, err := ps[0].Stored, error(nil)
	if ps[0].Sink != sink.Iceberg {
		// The live contents are in the row store: compare with the table
		// the output was (or will be) written to.
		ice, err = e.lake.Checksum(ctx, name, 0)
	}
	if errors.Is(err, facade.ErrTableNotFound) {
		c.printf("iceberg table: none (deploy the output with the override set first)\n")
		return &ParityError{Output: name, Postgres: pg}
	}
	if err != nil {
		return err
	}
	c.printf("iceberg table:    rows=%d checksum=%s\n", ice.Rows, ice)
	if ds.Sink != sink.Iceberg {
		c.printf("note: the live contents of %s are in %q, not in the Iceberg table\n", name, ds.Sink)
	}
	if pg != ice {
		return &ParityError{Output: name, Postgres: pg, Iceberg: ice}
	}
	c.printf("parity OK\n")
	return nil
}

// cmdRevert clears the dataset's override.
func cmdRevert(ctx context.Context, c *cli, datasetID string) error {
	e := c.env
	if _, err := e.ledger.Dataset(ctx, datasetID); err != nil {
		return err
	}
	n, err := e.flags.ClearOverride(ctx, writerID, datasetID)
	if err != nil {
		return err
	}
	if n == 0 {
		c.printf("override %s: none to clear\n", datasetID)
	} else {
		c.printf("override %s: cleared for writer %s\n", datasetID, writerID)
	}
	d, err := e.flags.Check(ctx, writerID, datasetID)
	if err != nil {
		return err
	}
	printDecision(c, d)
	c.printf("the revert is effective within the resolver TTL: running writers pick it up in at most %s (default %s)\n", sink.MaxTTL, sink.DefaultTTL)
	if _, ok := outputs()[datasetID]; ok {
		c.printf("next: canary deploy %s (a full rebuild on %s)\n", datasetID, d.Sink)
	}
	return nil
}

func knownOutput(name string) (writestrategy.WriteStrategy, error) {
	s, ok := outputs()[name]
	if !ok {
		return nil, &usageError{msg: fmt.Sprintf("unknown output %q (known: %s)", name, strings.Join(outputNames(), ", "))}
	}
	return s, nil
}
