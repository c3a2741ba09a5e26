// Package restcatalog is an Iceberg REST catalog server for tests: the
// endpoints of the Iceberg REST catalog OpenAPI specification that
// iceberg-go's REST client (catalog/rest) calls, served over
// net/http/httptest, with OAuth2 client credentials and fault injection.
//
// It is test-support code: only tests import it.
//
// # What it serves
//
//   - GET /v1/config, with the configured defaults and overrides (prefix,
//     warehouse, anything else) and the list of endpoints it serves; a
//     ?warehouse= naming an unknown warehouse is a 404.
//   - POST /v1/oauth/tokens: the OAuth2 client-credentials grant
//     (client_id and client_secret in the form body or in HTTP Basic auth).
//     When Config.Clients or Config.Tokens is set, every other endpoint
//     requires "Authorization: Bearer <token>": 401 without a valid token,
//     403 for a client marked forbidden.
//   - Namespaces: list (parent, pagination), create, load, exists (HEAD),
//     drop (409 when not empty), update properties.
//   - Tables: list, create (also stage-create), load, exists (HEAD), drop,
//     rename, commit (POST .../tables/{table}), and POST
//     /v1/{prefix}/transactions/commit (several tables, all or nothing).
//   - POST .../tables/{table}/metrics is accepted and ignored.
//
// Not served: views, functions, register, scan planning, credential
// vending, remote signing, Idempotency-Key (not advertised), ETags; a load
// with snapshots=refs is answered with all snapshots.
//
// # How it stores tables
//
// The catalog state (namespaces, and per table the current metadata and
// its location) lives in memory; the table metadata files are real: every
// create and commit writes a new metadata JSON file through iceberg-go's
// file IO under the table location (a local directory or an S3-compatible
// bucket, see Config.IOProps), as a REST catalog service does. A commit is
// checked server-side: its requirements are validated against the current
// metadata (409 CommitFailedException when one fails), its updates applied
// with table.UpdateTableMetadata (400 when they do not apply), then the new
// metadata file is written and the table's pointer swapped, all under one
// lock, so concurrent commits serialize like a compare-and-swap. A
// transaction validates and applies every table change before it swaps any
// pointer: all of them land or none.
//
// # Faults
//
// Server.Inject arms a Fault for an operation (and optionally one table):
// answer with an HTTP status before doing anything (409, 500, 503, 504:
// nothing changed), or do the work and then answer with a status (500, 502,
// 503, 504) or drop the connection without an answer (the change landed but
// the client cannot know). Server.Count reports how many requests of an
// operation arrived.
package restcatalog
