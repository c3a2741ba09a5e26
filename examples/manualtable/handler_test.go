package manualtable_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/examples/manualtable"
	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/internal/pgtest"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"
)

func TestMain(m *testing.M) { pgtest.MainWithDatabase(m, "DATABASE_URL") }

// env is one handler on a fresh database and warehouse, served by an
// httptest server.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	facade *facade.Facade        // nil with a double
	double *facadetest.Lakehouse // nil with the real facade
	srv    *httptest.Server

	mu    sync.Mutex
	armed map[facadetest.Point]error // the double's next failure at a point
}

type envOptions struct {
	double         bool
	ledgerWait     time.Duration
	batchRows      int
	maxUploadBytes int64
	maxLineBytes   int
	stall          time.Duration
	expectations   []ledger.Expectation
	// handlerMem, when set, is the handler's allocator (the facade keeps
	// its own), to measure what the handler alone holds.
	handlerMem memory.Allocator
	authorize  func(r *http.Request, datasetID string, action manualtable.Action) (string, error)
	// partitionFor is the real facade's Config.PartitionFor.
	partitionFor func(datasetID string) (facade.Partitioning, bool)
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // runs last

	url := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	led, err := ledger.New(pool, &ledger.Config{WaitTimeout: o.ledgerWait, Expectations: o.expectations})
	require.NoError(t, err)

	e := &env{t: t, pool: pool, ledger: led}
	var lh facade.Lakehouse
	if o.double {
		e.double = facadetest.New(&facadetest.Config{Allocator: mem})
		t.Cleanup(e.double.Close)
		// The handler writes through the double wrapped with a fault at
		// each point that fails as armed (arm), once, and otherwise lets
		// the write go on.
		var faults []facadetest.Fault
		for _, p := range []facadetest.Point{facadetest.MidStream, facadetest.BeforeCommit, facadetest.AfterCommit} {
			faults = append(faults, facadetest.Fault{Point: p, AfterRows: 2, Do: func(context.Context) error { return e.take(p) }})
		}
		lh = facadetest.Wrap(e.double, faults...)
	} else {
		cat, err := facade.OpenSQLCatalog(ctx, facade.CatalogConfig{DatabaseURL: url, Warehouse: t.TempDir()})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, cat.Close()) })
		e.facade, err = facade.New(cat, &facade.Config{Allocator: mem, PartitionFor: o.partitionFor})
		require.NoError(t, err)
		lh = e.facade
	}
	hmem := memory.Allocator(mem)
	if o.handlerMem != nil {
		hmem = o.handlerMem
	}
	h, err := manualtable.NewHandler(manualtable.Config{
		DB: pool, Ledger: led, Lakehouse: lh, Allocator: hmem,
		BatchRows: o.batchRows, MaxUploadBytes: o.maxUploadBytes, MaxLineBytes: o.maxLineBytes,
		BodyStallTimeout: o.stall, Authorize: o.authorize,
	})
	require.NoError(t, err)
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// arm makes the next write through the double fail with err at p
// (mid-stream: after 2 rows; after the commit: landed, reported as
// facade.ErrCommitStateUnknown).
func (e *env) arm(p facadetest.Point, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.armed == nil {
		e.armed = map[facadetest.Point]error{}
	}
	e.armed[p] = err
}

func (e *env) take(p facadetest.Point) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.armed[p]
	delete(e.armed, p)
	return err
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) result(t *testing.T) manualtable.Result {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var res manualtable.Result
	require.NoError(t, json.Unmarshal(r.body, &res))
	return res
}

func (r response) error(t *testing.T, status int, code string) manualtable.Problem {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "body: %s", r.body)
	var eb manualtable.Problem
	require.NoError(t, json.Unmarshal(r.body, &eb), "body: %s", r.body)
	require.Equal(t, code, eb.Code, "body: %s", r.body)
	require.Equal(t, manualtable.ProblemTypePrefix+code, eb.Type)
	require.Equal(t, status, eb.Status)
	require.Equal(t, http.StatusText(status), eb.Title)
	require.NotEmpty(t, eb.Detail)
	return eb
}

func (e *env) do(method, path, contentType string, body io.Reader) response {
	e.t.Helper()
	r, err := e.send(method, path, contentType, body)
	require.NoError(e.t, err)
	want := "application/json"
	if r.status >= 400 {
		want = "application/problem+json"
	}
	require.Equal(e.t, want, r.header.Get("Content-Type"), "body: %s", r.body)
	return r
}

// send is do without assertions, safe off the test goroutine.
func (e *env) send(method, path, contentType string, body io.Reader) (response, error) {
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		return response{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (e *env) declare(id string, cols ...string) response {
	e.t.Helper()
	var c []manualtable.Column
	for _, nt := range cols {
		name, typ, _ := strings.Cut(nt, " ")
		c = append(c, manualtable.Column{Name: name, Type: typ})
	}
	b, err := json.Marshal(manualtable.Declaration{Name: "Table " + id, Columns: c})
	require.NoError(e.t, err)
	return e.do(http.MethodPut, "/datasets/"+id, "application/json", bytes.NewReader(b))
}

func (e *env) uploadCSV(id, query, body string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/datasets/"+id+"/rows"+query, "text/csv", strings.NewReader(body))
}

func (e *env) uploadNDJSON(id, query, body string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/datasets/"+id+"/rows"+query, "application/x-ndjson", strings.NewReader(body))
}

// rows reads the current table back through the facade (or the double),
// business columns only, each value as Arrow prints it.
func (e *env) rows(id string) [][]string {
	e.t.Helper()
	var lh facade.Lakehouse = e.facade
	if e.double != nil {
		lh = e.double
	}
	var out [][]string
	for rec, err := range lh.Scan(context.Background(), id, facade.ScanOptions{ExcludeIdentity: true}) {
		require.NoError(e.t, err)
		for i := range int(rec.NumRows()) {
			row := make([]string, rec.NumCols())
			for j, col := range rec.Columns() {
				row[j] = col.ValueStr(i)
			}
			out = append(out, row)
		}
	}
	return out
}

// scanSchema returns the Arrow schema of the current table.
func (e *env) scanSchema(id string) *arrow.Schema {
	e.t.Helper()
	for rec, err := range e.facade.Scan(context.Background(), id, facade.ScanOptions{ExcludeIdentity: true}) {
		require.NoError(e.t, err)
		return rec.Schema()
	}
	e.t.Fatal("empty table")
	return nil
}

// currentSnapshot returns the current snapshot id of the real table (0 when
// none).
func (e *env) currentSnapshot(id string) int64 {
	e.t.Helper()
	if e.double != nil {
		snaps := e.double.Snapshots(id)
		if len(snaps) == 0 {
			return 0
		}
		return snaps[len(snaps)-1].ID
	}
	tbl, err := e.facade.LoadTable(context.Background(), id)
	if errors.Is(err, facade.ErrTableNotFound) {
		return 0
	}
	require.NoError(e.t, err)
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

func (e *env) txn(id string) ledger.Txn {
	e.t.Helper()
	require.NotEmpty(e.t, id, "no txn id")
	tx, err := e.ledger.Get(context.Background(), id)
	require.NoError(e.t, err)
	return tx
}

func (e *env) dataset(id string) ledger.Dataset {
	e.t.Helper()
	ds, err := e.ledger.Dataset(context.Background(), id)
	require.NoError(e.t, err)
	return ds
}

var allTypes = []string{
	"id int8", "n integer", "small smallint", "amount numeric(12,2)", "name text", "ok boolean",
	"score double precision", "ratio real", "day date", "at timestamp with time zone",
	"local timestamp", "doc jsonb", "uid uuid",
}

func TestCSVReplaceAndReadBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{batchRows: 2})
	require.Equal(t, http.StatusCreated, e.declare("orders", allTypes...).status)

	csv := "id,n,small,amount,name,ok,score,ratio,day,at,local,doc,uid\n" +
		"1,10,1,12.30,alpha,true,1.5,0.25,2024-01-02,2024-01-02T03:04:05.123456Z,2024-01-02 03:04:05,\"{\"\"a\"\": 1}\",0f8fad5b-d9cb-469f-a165-70867728950e\n" +
		"2,-20,2,-0.5,\"with, comma\",f,-2,1,1999-12-31,2024-01-02 05:04:05+02,2024-01-02T00:00:00,[1],0F8FAD5BD9CB469FA16570867728950F\n" +
		"3,,,,,,,,,,,,\n"
	res := e.uploadCSV("orders", "", csv).result(t)
	assert.Equal(t, "orders", res.DatasetID)
	assert.Equal(t, "replace", res.Mode)
	assert.EqualValues(t, 3, res.Rows)
	assert.NotZero(t, res.SnapshotID)
	assert.Positive(t, res.DataFiles)
	assert.False(t, res.CommittedAt.IsZero())

	assert.Equal(t, [][]string{
		{"1", "10", "1", "12.3", "alpha", "true", "1.5", "0.25", "2024-01-02", "2024-01-02T03:04:05.123456Z", "2024-01-02T03:04:05", `{"a": 1}`, "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"2", "-20", "2", "-0.5", "with, comma", "false", "-2", "1", "1999-12-31", "2024-01-02T03:04:05Z", "2024-01-02T00:00:00", "[1]", "0f8fad5b-d9cb-469f-a165-70867728950f"},
		{"3", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)"},
	}, e.rows("orders"))

	// Types reach the table as declared.
	sc := e.scanSchema("orders")
	want := map[string]string{
		"id": "int64", "n": "int32", "small": "int32", "amount": "decimal(12, 2)", "name": "utf8", "ok": "bool",
		"score": "float64", "ratio": "float32", "day": "date32", "at": "timestamp[us, tz=UTC]",
		"local": "timestamp[us]", "doc": "utf8", "uid": "extension<arrow.uuid>",
	}
	for _, f := range sc.Fields() {
		assert.Equal(t, want[f.Name], f.Type.String(), f.Name)
	}

	// The ledger recorded the write from the commit result.
	tx := e.txn(res.TxnID)
	assert.Equal(t, ledger.StatusCommitted, tx.Status)
	assert.EqualValues(t, 3, tx.RowCount)
	assert.Equal(t, res.SnapshotID, tx.SnapshotID)
	assert.Equal(t, manualtable.DefaultWriterID, tx.WriterID)
	assert.Equal(t, "iceberg_native", string(tx.Sink))
	assert.True(t, res.CommittedAt.Equal(tx.CommittedAt), "%v vs %v", res.CommittedAt, tx.CommittedAt)
	ds := e.dataset("orders")
	assert.EqualValues(t, 3, ds.RowCount)
	assert.Equal(t, "active", ds.Status)
	assert.Equal(t, "iceberg_native", string(ds.Sink))
	assert.True(t, res.CommittedAt.Equal(ds.SourceWatermark))
	// The declaration is one writestrategy reads, so the table can be a source.
	_, err := writestrategy.ParseSchema(ds.Schema)
	require.NoError(t, err)
	assert.JSONEq(t, `{"columns":[{"name":"id","type":"bigint"},{"name":"n","type":"integer"},{"name":"small","type":"smallint"},
		{"name":"amount","type":"numeric(12,2)"},{"name":"name","type":"text"},{"name":"ok","type":"boolean"},
		{"name":"score","type":"double precision"},{"name":"ratio","type":"real"},{"name":"day","type":"date"},
		{"name":"at","type":"timestamp with time zone"},{"name":"local","type":"timestamp without time zone"},
		{"name":"doc","type":"jsonb"},{"name":"uid","type":"uuid"}]}`, string(ds.Schema))

	// A second upload replaces the contents; header columns may come in any
	// order (and after a byte order mark).
	names := make([]string, len(allTypes))
	for i, c := range allTypes {
		names[len(names)-1-i], _, _ = strings.Cut(c, " ")
	}
	res2 := e.uploadCSV("orders", "?mode=replace", "\ufeff"+strings.Join(names, ",")+"\n"+strings.Repeat(",", 8)+"beta,,,,7\n").result(t)
	assert.EqualValues(t, 1, res2.Rows)
	assert.NotEqual(t, res.SnapshotID, res2.SnapshotID)
	rows := e.rows("orders")
	require.Len(t, rows, 1)
	assert.Equal(t, "7", rows[0][0])
	assert.Equal(t, "beta", rows[0][4])
	assert.EqualValues(t, 1, e.dataset("orders").RowCount)

	// A header-only upload empties the table when asked to explicitly.
	e.uploadCSV("orders", "", strings.Join(names, ",")+"\n").error(t, http.StatusBadRequest, manualtable.CodeEmptyUpload)
	require.Len(t, e.rows("orders"), 1)
	res3 := e.uploadCSV("orders", "?allow_empty=true", strings.Join(names, ",")+"\n").result(t)
	assert.EqualValues(t, 0, res3.Rows)
	assert.Empty(t, e.rows("orders"))
	assert.EqualValues(t, 0, e.dataset("orders").RowCount)
}

func TestNDJSONReplaceAndAppend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{batchRows: 3})
	require.Equal(t, http.StatusCreated, e.declare("events", "id bigint", "amount numeric(20,4)", "name text", "ok bool", "at timestamptz", "doc jsonb", "uid uuid").status)

	body := `{"id": 1, "amount": 1.5, "name": "a", "ok": true, "at": "2024-05-06T07:08:09Z", "doc": {"k": [1, 2]}, "uid": "0f8fad5b-d9cb-469f-a165-70867728950e"}
{"id": "9007199254740993", "amount": "1234567890123456.1234", "name": "", "ok": false, "doc": null}

{"id": 3, "amount": 2e3}
{"id": 4}
{"id": 5, "name": "ünïcödé"}
`
	res := e.uploadNDJSON("events", "", body).result(t)
	assert.EqualValues(t, 5, res.Rows)
	assert.Equal(t, [][]string{
		{"1", "1.5", "a", "true", "2024-05-06T07:08:09Z", `{"k": [1, 2]}`, "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"9007199254740993", "1234567890123456.1234", "", "false", "(null)", "(null)", "(null)"},
		{"3", "2000", "(null)", "(null)", "(null)", "(null)", "(null)"},
		{"4", "(null)", "(null)", "(null)", "(null)", "(null)", "(null)"},
		{"5", "(null)", "ünïcödé", "(null)", "(null)", "(null)", "(null)"},
	}, e.rows("events"))

	app := e.uploadNDJSON("events", "?mode=append", `{"id": 6}`+"\n"+`{"id": 7}`).result(t)
	assert.Equal(t, "append", app.Mode)
	assert.EqualValues(t, 2, app.Rows)
	assert.Len(t, e.rows("events"), 7)
	assert.EqualValues(t, 7, e.dataset("events").RowCount)
	assert.Equal(t, facade.Append, e.txn(app.TxnID).WriteMode)
}

// badUploads fail after the first batches were handed to the facade
// (batchRows is 2): nothing may be committed and the intent is aborted.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{batchRows: 2})
	require.Equal(t, http.StatusCreated, e.declare("t", "id bigint", "amount numeric(6,2)", "at timestamptz", "uid uuid", "doc jsonb").status)
	good := "id,amount,at,uid,doc\n1,1.00,2024-01-01T00:00:00Z,0f8fad5b-d9cb-469f-a165-70867728950e,{}\n"
	before := e.uploadCSV("t", "", good).result(t)
	wantRows := e.rows("t")

	okRows := strings.Repeat("2,2.00,,,\n", 6) // lines 2-7: three batches
	csvCases := []struct {
		name, body, code string
		line             int64
		column           string
	}{
		{"bad integer", okRows + "x,1,,,\n", manualtable.CodeTypeMismatch, 8, "id"},
		{"integer overflow", okRows + "9223372036854775808,1,,,\n", manualtable.CodeTypeMismatch, 8, "id"},
		{"decimal too many places", okRows + "1,1.001,,,\n", manualtable.CodeTypeMismatch, 8, "amount"},
		{"decimal too many digits", okRows + "1,10000.00,,,\n", manualtable.CodeTypeMismatch, 8, "amount"},
		{"bad timestamp", okRows + "1,1,yesterday,,\n", manualtable.CodeTypeMismatch, 8, "at"},
		{"bad uuid", okRows + "1,1,,not-a-uuid,\n", manualtable.CodeTypeMismatch, 8, "uid"},
		{"bad json", okRows + "1,1,,,{nope\n", manualtable.CodeTypeMismatch, 8, "doc"},
		{"unterminated quote", okRows + "1,\"1,,,\n", manualtable.CodeBadCSV, 8, ""},
		{"field count", okRows + "1,1\n", manualtable.CodeBadCSV, 8, ""},
	}
	for _, c := range csvCases {
		eb := e.uploadCSV("t", "", "id,amount,at,uid,doc\n"+c.body).error(t, http.StatusBadRequest, c.code)
		assert.Equal(t, c.line, eb.Line, c.name)
		assert.Equal(t, c.column, eb.Column, c.name)
		tx := e.txn(eb.TxnID)
		assert.Equal(t, ledger.StatusAborted, tx.Status, c.name)
		assert.Contains(t, tx.Error, eb.Detail, c.name)
	}
	ndjsonCases := []struct {
		name, body, code string
		line             int64
		column           string
	}{
		{"string for integer", `{"id": "x"}`, manualtable.CodeTypeMismatch, 8, "id"},
		{"fraction for integer", `{"id": 1.5}`, manualtable.CodeTypeMismatch, 8, "id"},
		{"number for timestamp", `{"at": 5}`, manualtable.CodeTypeMismatch, 8, "at"},
		{"unknown column", `{"idd": 1}`, manualtable.CodeBadJSON, 8, "idd"},
		{"not an object", `[1]`, manualtable.CodeBadJSON, 8, ""},
		{"malformed", `{"id": 1`, manualtable.CodeBadJSON, 8, ""},
	}
	for _, c := range ndjsonCases {
		body := strings.Repeat(`{"id": 2, "amount": "2.5"}`+"\n", 7) + c.body + "\n" + `{"id": 3}` + "\n"
		eb := e.uploadNDJSON("t", "", body).error(t, http.StatusBadRequest, c.code)
		assert.Equal(t, c.line, eb.Line, c.name)
		assert.Equal(t, c.column, eb.Column, c.name)
		assert.Equal(t, ledger.StatusAborted, e.txn(eb.TxnID).Status, c.name)
	}

	// Header problems are found before any intent is opened.
	for _, h := range []string{"id,amount,at,uid\n", "id,amount,at,uid,doc,extra\n", "id,id,at,uid,doc\n", ""} {
		eb := e.uploadCSV("t", "", h+"1,1,,,\n").error(t, http.StatusBadRequest, manualtable.CodeBadCSV)
		assert.Empty(t, eb.TxnID)
		assert.EqualValues(t, 1, eb.Line)
	}

	assert.Equal(t, before.SnapshotID, e.currentSnapshot("t"), "no new snapshot")
	assert.Equal(t, wantRows, e.rows("t"))
	assert.EqualValues(t, 1, e.dataset("t").RowCount)
}

// slowReader hides the body length so the client streams it chunked.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) { return s.r.Read(p) }

func TestTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxUploadBytes: 4 << 10, maxLineBytes: 100, batchRows: 10})
	require.Equal(t, http.StatusCreated, e.declare("big", "id bigint", "name text").status)
	var b strings.Builder
	b.WriteString("id,name\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "%d,row %d\n", i, i)
	}
	// Streamed without a length: cut off by the limit mid-upload.
	resp := e.do(http.MethodPost, "/datasets/big/rows", "text/csv", slowReader{strings.NewReader(b.String())})
	eb := resp.error(t, http.StatusRequestEntityTooLarge, manualtable.CodeTooLarge)
	assert.Equal(t, ledger.StatusAborted, e.txn(eb.TxnID).Status)
	// With a Content-Length: refused up front.
	eb = e.uploadCSV("big", "", b.String()).error(t, http.StatusRequestEntityTooLarge, manualtable.CodeTooLarge)
	assert.Empty(t, eb.TxnID)
	// One NDJSON line over the line limit is too large as well.
	long := `{"id": 1, "name": "` + strings.Repeat("x", 200) + `"}`
	eb = e.uploadNDJSON("big", "", strings.Repeat(`{"id": 1}`+"\n", 20)+long+"\n").error(t, http.StatusRequestEntityTooLarge, manualtable.CodeTooLarge)
	assert.EqualValues(t, 21, eb.Line)
	assert.Equal(t, ledger.StatusAborted, e.txn(eb.TxnID).Status)
	assert.Zero(t, e.currentSnapshot("big"))
	assert.EqualValues(t, 0, e.dataset("big").RowCount)
}

func TestUnknownDatasetAndBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.uploadCSV("nope", "", "id\n1\n").error(t, http.StatusNotFound, manualtable.CodeUnknownDataset)
	e.do(http.MethodGet, "/datasets/nope", "", nil).error(t, http.StatusNotFound, manualtable.CodeUnknownDataset)

	require.Equal(t, http.StatusCreated, e.declare("d", "id bigint").status)
	e.do(http.MethodPost, "/datasets/d/rows", "application/json", strings.NewReader(`{"id":1}`)).error(t, http.StatusUnsupportedMediaType, manualtable.CodeUnsupported)
	e.do(http.MethodPost, "/datasets/d/rows", "text/csv; charset=latin1", strings.NewReader("id\n1\n")).error(t, http.StatusUnsupportedMediaType, manualtable.CodeUnsupported)
	e.uploadCSV("d", "?mode=upsert", "id\n1\n").error(t, http.StatusBadRequest, manualtable.CodeBadRequest)

	// A dataset registered without declared columns (e.g. a pipeline
	// output) is not a manual table.
	_, err := e.ledger.EnsureDataset(context.Background(), "pipe", "pipeline output", nil)
	require.NoError(t, err)
	e.uploadCSV("pipe", "", "id\n1\n").error(t, http.StatusConflict, manualtable.CodeNotManual)
}

// Manual tables and pipeline outputs cannot overwrite each other: PUT
// claims the dataset for the handler's writer, the ledger refuses other
// writers on it, and a dataset another writer wrote cannot be declared or
// uploaded to.
func TestOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{double: true})
	pipeline := func(id string) ledger.OpenParams {
		return ledger.OpenParams{DatasetID: id, WriterID: "pipeline.output", Sink: "pg", WriteMode: facade.Replace}
	}

	// A declared manual table: owned by the handler, refused to a pipeline.
	require.Equal(t, http.StatusCreated, e.declare("m", "id bigint").status)
	assert.Equal(t, manualtable.DefaultWriterID, e.dataset("m").Owner)
	_, err := e.ledger.Open(ctx, pipeline("m"))
	require.ErrorIs(t, err, ledger.ErrNotOwner)
	e.uploadCSV("m", "", "id\n1\n").result(t)

	// A pipeline output with a committed schema: neither declarable nor
	// uploadable, and left as it was.
	_, err = e.ledger.EnsureDataset(ctx, "p", "pipeline output", nil)
	require.NoError(t, err)
	in, err := e.ledger.Open(ctx, pipeline("p"))
	require.NoError(t, err)
	require.NoError(t, e.ledger.Commit(ctx, in, ledger.Outcome{RowCount: 5, CommittedAt: time.Now(), Schema: []byte(`{"columns":[{"name":"id","type":"bigint"}]}`)}))
	e.uploadCSV("p", "", "id\n1\n").error(t, http.StatusConflict, manualtable.CodeNotManual)
	eb := e.declare("p", "id bigint").error(t, http.StatusConflict, manualtable.CodeNotManual)
	assert.Contains(t, eb.Detail, `belongs to writer "pipeline.output"`)
	ds := e.dataset("p")
	assert.Equal(t, "", ds.Owner)
	assert.EqualValues(t, 5, ds.RowCount)
	assert.Equal(t, "pipeline output", ds.Name)

	// Owned by another writer: refused too.
	_, err = e.ledger.EnsureDataset(ctx, "q", "", nil)
	require.NoError(t, err)
	require.NoError(t, e.ledger.ClaimDataset(ctx, "q", "sync.crm"))
	e.declare("q", "id bigint").error(t, http.StatusConflict, manualtable.CodeNotManual)

	// A manual table from before owners existed: uploads are refused until
	// it is declared again, which claims it.
	require.NoError(t, e.ledger.SetDatasetOwner(ctx, "m", ""))
	e.uploadCSV("m", "", "id\n2\n").error(t, http.StatusConflict, manualtable.CodeNotManual)
	assert.Equal(t, http.StatusOK, e.declare("m", "id bigint").status)
	assert.Equal(t, manualtable.DefaultWriterID, e.dataset("m").Owner)
	e.uploadCSV("m", "", "id\n2\n").result(t)
}

func TestDeclare(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r := e.declare("d1", "id int8", "amount decimal(10, 2)", "at TIMESTAMPTZ", "flag bool", "n int")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var info manualtable.DatasetInfo
	require.NoError(t, json.Unmarshal(r.body, &info))
	assert.Equal(t, []manualtable.Column{{Name: "id", Type: "bigint"}, {Name: "amount", Type: "numeric(10,2)"},
		{Name: "at", Type: "timestamp with time zone"}, {Name: "flag", Type: "boolean"}, {Name: "n", Type: "integer"}}, info.Columns)
	assert.Equal(t, "Table d1", info.Name)
	assert.Equal(t, "pending", info.Status)

	// Same declaration again: unchanged; a new one: updated.
	assert.Equal(t, http.StatusOK, e.declare("d1", "id bigint", "amount numeric(10,2)", "at timestamp with time zone", "flag boolean", "n integer").status)
	r = e.declare("d1", "id bigint", "note text")
	require.Equal(t, http.StatusOK, r.status)
	r = e.do(http.MethodGet, "/datasets/d1", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NoError(t, json.Unmarshal(r.body, &info))
	assert.Equal(t, []manualtable.Column{{Name: "id", Type: "bigint"}, {Name: "note", Type: "text"}}, info.Columns)

	for _, cols := range [][]string{
		{"n numeric"}, {"n money"}, {"n numeric(39,2)"}, {"a int", "a int"}, {"a int", "A int"}, {"__row_id bigint"}, {"bad-name int"}, {},
	} {
		e.declare("d2", cols...).error(t, http.StatusBadRequest, manualtable.CodeBadSchema)
	}
	e.do(http.MethodPut, "/datasets/d2", "application/json", strings.NewReader(`{"columns":[{"name":"a","type":"int"}],"extra":1}`)).error(t, http.StatusBadRequest, manualtable.CodeBadSchema)
	require.Equal(t, http.StatusCreated, e.declare("d3", "j json", "k numeric(38,0)").status)
	_, err := writestrategy.ParseSchema(e.dataset("d3").Schema)
	require.NoError(t, err)
	e.declare("bad.id", "a int").error(t, http.StatusBadRequest, manualtable.CodeBadRequest)
	e.do(http.MethodGet, "/datasets/d2", "", nil).error(t, http.StatusNotFound, manualtable.CodeUnknownDataset)
}

func TestWriteFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{double: true, batchRows: 2})
	require.Equal(t, http.StatusCreated, e.declare("w", "id bigint").status)
	first := e.uploadCSV("w", "", "id\n1\n2\n3\n").result(t)
	body := "id\n4\n5\n6\n7\n"

	cases := []struct {
		at     facadetest.Point
		err    error
		status int
		code   string
		want   ledger.Status
	}{
		{facadetest.MidStream, facadetest.ErrInjected, http.StatusInternalServerError, manualtable.CodeWriteFailed, ledger.StatusAborted},
		{facadetest.BeforeCommit, facade.ErrCommitConflict, http.StatusConflict, manualtable.CodeConflict, ledger.StatusAborted},
	}
	for _, c := range cases {
		e.arm(c.at, c.err)
		eb := e.uploadCSV("w", "", body).error(t, c.status, c.code)
		assert.Equal(t, c.want, e.txn(eb.TxnID).Status, c.code)
		assert.Equal(t, first.SnapshotID, e.currentSnapshot("w"))
	}

	// Commit state unknown: 503, the intent stays open for reconciliation
	// (the next upload would wait on it), and Recover resolves it from the
	// lakehouse: absent -> aborted, landed -> rolled forward.
	reconcile := func() ledger.SweepReport {
		rep, err := e.ledger.Recover(context.Background(), "w", time.Nanosecond, func(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
			res, found, err := e.double.FindTxn(ctx, in.DatasetID, in.ID)
			if err != nil || !found {
				return ledger.Landing{}, err
			}
			return ledger.Landing{Landed: true, Outcome: ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt}}, nil
		})
		require.NoError(t, err)
		return rep
	}
	e.arm(facadetest.BeforeCommit, facade.ErrCommitStateUnknown)
	eb := e.uploadCSV("w", "", body).error(t, http.StatusServiceUnavailable, manualtable.CodeOutcomeUnknown)
	assert.Equal(t, ledger.StatusOpen, e.txn(eb.TxnID).Status)
	assert.Len(t, reconcile().Aborted, 1)
	assert.Equal(t, ledger.StatusAborted, e.txn(eb.TxnID).Status)
	assert.Equal(t, first.SnapshotID, e.currentSnapshot("w"))

	e.arm(facadetest.AfterCommit, facadetest.ErrInjected)
	eb = e.uploadCSV("w", "", body).error(t, http.StatusServiceUnavailable, manualtable.CodeOutcomeUnknown)
	assert.Equal(t, ledger.StatusOpen, e.txn(eb.TxnID).Status)
	assert.Len(t, reconcile().RolledForward, 1)
	assert.Equal(t, ledger.StatusCommitted, e.txn(eb.TxnID).Status)
	assert.EqualValues(t, 4, e.dataset("w").RowCount)

	// Clean afterwards: the next upload lands.
	e.uploadCSV("w", "", body).result(t)

	// Without any Recover call, the next upload reconciles an intent left
	// open by an unknown outcome (here: landed) by itself, then lands.
	e.arm(facadetest.AfterCommit, facadetest.ErrInjected)
	eb = e.uploadCSV("w", "", body).error(t, http.StatusServiceUnavailable, manualtable.CodeOutcomeUnknown)
	assert.Equal(t, ledger.StatusOpen, e.txn(eb.TxnID).Status)
	e.uploadCSV("w", "", body).result(t)
	assert.Equal(t, ledger.StatusCommitted, e.txn(eb.TxnID).Status)
}

// A ledger expectation that refuses an upload answers 422 and leaves the
// table as it was: the expectations are asked before the snapshot commit.
func TestVetoedUploadLeavesTableUnchanged(t *testing.T) {
	t.Parallel()
	atMost3 := func(ctx context.Context, tx pgx.Tx, c ledger.Commit) error {
		if c.Outcome.RowCount > 3 {
			return fmt.Errorf("at most 3 rows, got %d", c.Outcome.RowCount)
		}
		return nil
	}
	for _, double := range []bool{false, true} {
		t.Run(fmt.Sprintf("double=%t", double), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{double: double, batchRows: 2, expectations: []ledger.Expectation{atMost3}})
			require.Equal(t, http.StatusCreated, e.declare("v", "id bigint").status)
			first := e.uploadCSV("v", "", "id\n1\n2\n3\n").result(t)
			eb := e.uploadCSV("v", "", "id\n4\n5\n6\n7\n").error(t, http.StatusUnprocessableEntity, manualtable.CodeVetoed)
			assert.Contains(t, eb.Detail, "at most 3 rows, got 4")
			assert.Equal(t, ledger.StatusAborted, e.txn(eb.TxnID).Status)
			assert.Equal(t, first.SnapshotID, e.currentSnapshot("v"))
			assert.Equal(t, [][]string{{"1"}, {"2"}, {"3"}}, e.rows("v"))
			assert.EqualValues(t, 3, e.dataset("v").RowCount)
		})
	}
}

// Concurrent uploads of one dataset: the ledger serializes them, both land
// as whole snapshots, and the table holds exactly one of the uploads.
func TestConcurrentUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{batchRows: 100})
	require.Equal(t, http.StatusCreated, e.declare("c", "id bigint", "who text").status)
	const n = 3
	bodies := make([]string, n)
	for i := range n {
		var b strings.Builder
		b.WriteString("id,who\n")
		for j := range 500 * (i + 1) {
			fmt.Fprintf(&b, "%d,writer%d\n", j, i)
		}
		bodies[i] = b.String()
	}
	results := make([]manualtable.Result, n)
	responses := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := e.send(http.MethodPost, "/datasets/c/rows", "text/csv", strings.NewReader(bodies[i]))
			if err != nil {
				r.body = []byte(err.Error())
			}
			responses[i] = r
		})
	}
	wg.Wait()
	snaps := map[int64]bool{}
	var last manualtable.Result
	for i := range n {
		results[i] = responses[i].result(t)
		assert.EqualValues(t, 500*(i+1), results[i].Rows)
		snaps[results[i].SnapshotID] = true
		if results[i].CommittedAt.After(last.CommittedAt) || last.TxnID == "" {
			last = results[i]
		}
	}
	assert.Len(t, snaps, n, "one snapshot per upload")
	// The table holds exactly the last committed upload.
	rows := e.rows("c")
	assert.Len(t, rows, int(last.Rows))
	who := rows[0][1]
	for _, r := range rows {
		require.Equal(t, who, r[1], "rows of two uploads mixed")
	}
	assert.Equal(t, last.SnapshotID, e.currentSnapshot("c"))
	assert.Equal(t, last.Rows, e.dataset("c").RowCount)
}

// A second upload that cannot get the dataset within the ledger's wait
// budget gets 409 busy; the first one still lands. A declaration change
// while the upload is in flight is refused too.
func TestConcurrentUploadBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{ledgerWait: 300 * time.Millisecond, batchRows: 2})
	require.Equal(t, http.StatusCreated, e.declare("b", "id bigint").status)

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	first := make(chan response, 1)
	go func() {
		r, err := e.send(http.MethodPost, "/datasets/b/rows", "text/csv", pr)
		if err != nil {
			r.body = []byte(err.Error())
		}
		first <- r
	}()
	_, err := io.WriteString(pw, "id\n1\n2\n3\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, open, err := e.ledger.OldestOpen(context.Background(), "b")
		return err == nil && open
	}, 10*time.Second, 10*time.Millisecond)

	r := e.uploadCSV("b", "", "id\n9\n")
	r.error(t, http.StatusConflict, manualtable.CodeBusy)
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	e.declare("b", "id bigint", "extra text").error(t, http.StatusConflict, manualtable.CodeBusy)

	_, err = io.WriteString(pw, "4\n")
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	res := (<-first).result(t)
	assert.EqualValues(t, 4, res.Rows)
	assert.Equal(t, [][]string{{"1"}, {"2"}, {"3"}, {"4"}}, e.rows("b"))
	// Once the write ended the declaration can change.
	assert.Equal(t, http.StatusOK, e.declare("b", "id bigint", "extra text").status)
}

// peakAllocator records the most memory allocated at once.
type peakAllocator struct {
	*memory.CheckedAllocator
	mu        sync.Mutex
	cur, peak int
}

func (p *peakAllocator) Allocate(n int) []byte {
	p.mu.Lock()
	p.cur += n
	p.peak = max(p.peak, p.cur)
	p.mu.Unlock()
	return p.CheckedAllocator.Allocate(n)
}

func (p *peakAllocator) Reallocate(n int, b []byte) []byte {
	p.mu.Lock()
	p.cur += n - len(b)
	p.peak = max(p.peak, p.cur)
	p.mu.Unlock()
	return p.CheckedAllocator.Reallocate(n, b)
}

func (p *peakAllocator) Free(b []byte) {
	p.mu.Lock()
	p.cur -= len(b)
	p.mu.Unlock()
	p.CheckedAllocator.Free(b)
}

// The body is streamed: the handler holds about one batch of Arrow memory
// whatever the size of the upload.
func TestUploadIsStreamed(t *testing.T) {
	t.Parallel()
	pa := &peakAllocator{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	t.Cleanup(func() { pa.AssertSize(t, 0) })
	e := newEnv(t, envOptions{batchRows: 1000, handlerMem: pa})
	require.Equal(t, http.StatusCreated, e.declare("s", "id bigint", "amount numeric(18,2)", "name text").status)
	const rows = 200_000
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() }) // unblocks the writer if the request ends early
	go func() {
		bw := bufio.NewWriterSize(pw, 64<<10)
		bw.WriteString("id,amount,name\n")
		for i := range rows {
			fmt.Fprintf(bw, "%d,%d.%02d,name number %d\n", i, i, i%100, i)
		}
		pw.CloseWithError(bw.Flush())
	}()
	res := e.do(http.MethodPost, "/datasets/s/rows", "text/csv", pr).result(t)
	assert.EqualValues(t, rows, res.Rows)
	// The rows take about 8 MiB as Arrow; the handler holds its builders
	// plus the few batches the facade's write queue still references.
	assert.Less(t, pa.peak, 1<<20, "peak Arrow memory of the handler")
	t.Logf("handler peak Arrow memory: %d bytes for %d rows", pa.peak, rows)
	assert.EqualValues(t, rows, e.dataset("s").RowCount)
}

// An upload to a partitioned table whose rows come back to a partition
// after another answers 422 partition_order, a problem document saying how
// to send the rows; nothing is written and the intent is aborted. The same
// rows grouped by partition land.
func TestPartitionOrderProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{partitionFor: func(id string) (facade.Partitioning, bool) {
		return facade.Partitioning{Fields: []facade.PartitionField{{Column: "cat"}}}, id == "p"
	}})
	require.Equal(t, http.StatusCreated, e.declare("p", "id bigint", "cat text").status)
	first := e.uploadCSV("p", "", "id,cat\n1,a\n2,a\n3,b\n").result(t)
	eb := e.uploadCSV("p", "", "id,cat\n1,a\n2,b\n3,a\n").error(t, http.StatusUnprocessableEntity, manualtable.CodePartitionOrder)
	assert.Contains(t, eb.Detail, "not grouped by partition")
	assert.Contains(t, eb.Detail, "nothing was written")
	assert.Equal(t, "/datasets/p/rows", eb.Instance)
	assert.Equal(t, ledger.StatusAborted, e.txn(eb.TxnID).Status)
	assert.Equal(t, first.SnapshotID, e.currentSnapshot("p"))
	assert.ElementsMatch(t, [][]string{{"1", "a"}, {"2", "a"}, {"3", "b"}}, e.rows("p"))

	e.uploadCSV("p", "", "id,cat\n1,a\n3,a\n2,b\n").result(t)
	assert.ElementsMatch(t, [][]string{{"1", "a"}, {"3", "a"}, {"2", "b"}}, e.rows("p"))
}
