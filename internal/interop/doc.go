// Package interop reads every kind of table lakewrite writes with another
// engine, DuckDB (through its Go bindings, which ship the library), and
// compares each value with Postgres, the source of truth.
//
// It is a module of its own so that DuckDB and cgo never reach the builds
// of lakewrite's users; its module path lies under lakewrite's internal/,
// which lets its tests use internal/pgtest. Run it from this directory:
//
//	go test -count=1 ./...
package interop
