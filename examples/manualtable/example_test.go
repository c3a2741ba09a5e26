package manualtable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakewrite/lakewrite/examples/manualtable"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// Wiring the handler: the ledger and the Iceberg SQL catalog share one
// Postgres database; the warehouse is a local directory. A service would
// mount the handler on its own server (http.ListenAndServe); here an
// httptest server takes a declaration and an upload.
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
	warehouse, err := os.MkdirTemp("", "lakewrite-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(warehouse)
	cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: warehouse})
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
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(method, path, contentType, body string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Rows    *int64 `json:"rows"`
			Code    string `json:"code"`
			Columns []manualtable.Column
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			log.Fatal(err)
		}
		switch {
		case out.Code != "":
			fmt.Println(resp.StatusCode, out.Code)
		case out.Rows != nil:
			fmt.Println(resp.StatusCode, "rows", *out.Rows)
		default:
			fmt.Println(resp.StatusCode, "columns", len(out.Columns))
		}
	}
	send(http.MethodPut, "/api/datasets/prices", "application/json",
		`{"name":"Prices","columns":[{"name":"sku","type":"text"},{"name":"price","type":"numeric(12,2)"}]}`)
	send(http.MethodPost, "/api/datasets/prices/rows", "text/csv", "sku,price\nA-1,9.99\nB-2,12.50\n")
	send(http.MethodPost, "/api/datasets/prices/rows", "text/csv", "sku,price\nC-3,abc\n")
	send(http.MethodPost, "/api/datasets/prices/rows", "text/csv", "sku,price\n")
	// Output:
	// 201 columns 2
	// 200 rows 2
	// 400 type_mismatch
	// 400 empty_upload
}
