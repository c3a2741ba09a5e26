// Command manualtable serves the manual-table handler over HTTP, with the
// ledger and an Iceberg SQL catalog in one Postgres database and a local
// (or object-store) warehouse:
//
//	manualtable -database-url postgres://... -warehouse /var/lib/lakewrite -addr :8080
//
//	curl -X PUT localhost:8080/datasets/prices -d '{"name":"Prices","columns":[{"name":"sku","type":"text"},{"name":"price","type":"numeric(12,2)"}]}'
//	curl -X POST localhost:8080/datasets/prices/rows -H 'Content-Type: text/csv' --data-binary @prices.csv
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/examples/manualtable"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manualtable:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", ":8080", "listen address")
	// The default is read after parsing: a flag default is printed by -h,
	// and a URL may hold a password.
	dbURL := flag.String("database-url", "", "Postgres URL of the ledger and the SQL catalog (default $DATABASE_URL)")
	warehouse := flag.String("warehouse", "", "warehouse directory or object-store URL")
	maxBytes := flag.Int64("max-upload-bytes", 0, "largest accepted upload (0: 256 MiB)")
	flag.Parse()
	if *dbURL == "" {
		*dbURL = os.Getenv("DATABASE_URL")
	}
	if *dbURL == "" || *warehouse == "" {
		return errors.New("-database-url (or DATABASE_URL) and -warehouse are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := ledger.Migrate(ctx, pool, ""); err != nil {
		return err
	}
	led, err := ledger.New(pool, &ledger.Config{Logger: log})
	if err != nil {
		return err
	}
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: *dbURL, Warehouse: *warehouse})
	if err != nil {
		return err
	}
	defer cat.Close()
	lh, err := facade.New(cat, &facade.Config{Logger: log})
	if err != nil {
		return err
	}
	h, err := manualtable.NewHandler(manualtable.Config{DB: pool, Ledger: led, Lakehouse: lh, Logger: log, MaxUploadBytes: *maxBytes})
	if err != nil {
		return err
	}
	// Uploads may be long: no whole-request ReadTimeout or WriteTimeout; the
	// handler bounds a stalled body itself (Config.BodyStallTimeout).
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("manualtable listening", "addr", *addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
