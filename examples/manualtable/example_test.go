package manualtable_test

import (
	"context"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/examples/manualtable"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// Wiring the handler: the ledger and the Iceberg SQL catalog share one
// Postgres database; the warehouse is a local directory.
func ExampleNewHandler() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := ledger.Migrate(ctx, pool, ""); err != nil {
		log.Fatal(err)
	}
	led, err := ledger.New(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	cat, err := facade.OpenSQLCatalog(ctx, facade.SQLCatalogConfig{DatabaseURL: url, Warehouse: "/var/lib/lakewrite"})
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	lh, err := facade.New(cat, nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := manualtable.NewHandler(manualtable.Config{DB: pool, Ledger: led, Lakehouse: lh})
	if err != nil {
		log.Fatal(err)
	}
	// PUT /api/datasets/{id}, GET /api/datasets/{id}, POST /api/datasets/{id}/rows
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", h))
	log.Fatal(http.ListenAndServe(":8080", mux))
}
