package manualtable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/writestrategy"

	"github.com/lakewrite/lakewrite/sink"
)

// maxDeclarationBytes bounds a PUT body.
const maxDeclarationBytes = 1 << 20

// handler serves the manual-table routes.
type handler struct {
	cfg Config
	mux *http.ServeMux
}

// NewHandler returns the manual-table HTTP handler:
//
//	PUT  /datasets/{id}       declare or update a manual table
//	GET  /datasets/{id}       read its declaration and state
//	POST /datasets/{id}/rows  upload its contents (CSV or NDJSON)
//
// Mount it under a prefix with http.StripPrefix.
func NewHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &handler{cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("PUT /datasets/{id}", h.declare)
	h.mux.HandleFunc("GET /datasets/{id}", h.get)
	h.mux.HandleFunc("POST /datasets/{id}/rows", h.upload)
	return h, nil
}

// ServeHTTP answers a request for no route (404) or a route with another
// method (405) with a problem document too, not the mux's plain text.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern != "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		h.fail(w, r, badInput(http.StatusNotFound, CodeNotFound, 0, "", "no route %s %s", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	h.fail(w, r, badInput(http.StatusMethodNotAllowed, CodeMethod, 0, "", "method %s not allowed on %s: allowed %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// authorize asks Config.Authorize about the request; it answers the
// request itself (401/403) and returns false when refused.
func (h *handler) authorize(w http.ResponseWriter, r *http.Request, id string, action Action) (string, bool) {
	if h.cfg.Authorize == nil {
		return "", true
	}
	principal, err := h.cfg.Authorize(r, id, action)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		h.fail(w, r, &InputError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: err.Error(), Err: err})
		return "", false
	case err != nil:
		h.fail(w, r, &InputError{Status: http.StatusForbidden, Code: CodeForbidden, Msg: err.Error(), Err: err})
		return "", false
	}
	return principal, true
}

// Declaration is the body of PUT /datasets/{id}.
type Declaration struct {
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
}

// DatasetInfo is the answer of PUT and GET /datasets/{id}.
type DatasetInfo struct {
	DatasetID       string     `json:"dataset_id"`
	Name            string     `json:"name"`
	Columns         []Column   `json:"columns"`
	RowCount        int64      `json:"row_count"`
	Status          string     `json:"status"`
	Sink            string     `json:"sink,omitempty"`
	SourceWatermark *time.Time `json:"source_watermark,omitempty"`
}

// Result is the answer of a successful upload.
type Result struct {
	DatasetID   string    `json:"dataset_id"`
	TxnID       string    `json:"txn_id"`
	Mode        string    `json:"mode"`
	Rows        int64     `json:"rows"`
	SnapshotID  int64     `json:"snapshot_id"`
	CommittedAt time.Time `json:"committed_at"`
	DataFiles   int       `json:"data_files"`
}

// ProblemTypePrefix prefixes the Problem.Type of every error answer; the
// rest is the Problem.Code.
const ProblemTypePrefix = "urn:lakewrite:manualtable:"

// Problem is the answer of a failed request: an RFC 9457 problem details
// document (Content-Type application/problem+json) with the handler's
// extension members code, line, column and txn_id.
type Problem struct {
	// Type is ProblemTypePrefix + Code.
	Type string `json:"type"`
	// Title is the HTTP status text.
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail says what went wrong with this request.
	Detail string `json:"detail"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Line is the 1-based line of the body concerned, Column the declared
	// column, TxnID the ledger intent of the upload; each when it applies.
	Line   int64  `json:"line,omitempty"`
	Column string `json:"column,omitempty"`
	TxnID  string `json:"txn_id,omitempty"`
}

func (h *handler) datasetsTable() string {
	return pgx.Identifier{h.cfg.Ledger.Schema(), "datasets"}.Sanitize()
}

func (h *handler) intentsTable() string {
	return pgx.Identifier{h.cfg.Ledger.Schema(), "pipeline_build_transactions"}.Sanitize()
}

// declare records a manual table's name and columns in datasets. Changing
// the declaration of a dataset with a write in flight is refused (409
// busy), so an upload always commits the declaration it parsed against.
func (h *handler) declare(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if facade.CheckDatasetID(id) != nil {
		h.fail(w, r, badInput(http.StatusBadRequest, CodeBadRequest, 0, "", "dataset id %q: want 1-128 characters of [A-Za-z0-9_-], starting with a letter or digit", id))
		return
	}
	if _, ok := h.authorize(w, r, id, ActionDeclare); !ok {
		return
	}
	var d Declaration
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxDeclarationBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		h.fail(w, r, readError(fmt.Errorf("declaration is not {\"name\":..., \"columns\":[{\"name\":..., \"type\":...}]}: %w", err), 0, CodeBadSchema))
		return
	}
	tbl, err := validateSchema(Schema{Columns: d.Columns})
	if err != nil {
		h.fail(w, r, badInput(http.StatusBadRequest, CodeBadSchema, 0, "", "%v", err))
		return
	}
	created := false
	err = pgx.BeginFunc(ctx, h.cfg.DB, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO `+h.datasetsTable()+` (id, name, schema, owner) VALUES ($1, $2, $3::jsonb, $4)
			ON CONFLICT (id) DO NOTHING`, id, d.Name, string(tbl.schemaJSON()), h.cfg.WriterID)
		if err != nil {
			return err
		}
		if created = tag.RowsAffected() == 1; created {
			return nil
		}
		// Lock the row first, then look for a write in flight: an upload
		// opens its intent before reading the declaration FOR SHARE, so
		// one of the two always sees the other.
		var name, owner string
		var schema []byte
		if err := tx.QueryRow(ctx, `SELECT name, schema, coalesce(owner, '') FROM `+h.datasetsTable()+` WHERE id = $1 FOR UPDATE`, id).
			Scan(&name, &schema, &owner); err != nil {
			return err
		}
		claim := owner != h.cfg.WriterID
		if claim {
			// A dataset another writer owns or has written (a pipeline
			// output) is not a manual table: declaring it would let
			// uploads overwrite that writer's table.
			other := owner
			if other == "" {
				err := tx.QueryRow(ctx, `SELECT writer_id FROM `+h.intentsTable()+` WHERE dataset_id = $1 AND writer_id <> $2 LIMIT 1`,
					id, h.cfg.WriterID).Scan(&other)
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
			}
			if other != "" {
				return &InputError{Status: http.StatusConflict, Code: CodeNotManual,
					Msg: fmt.Sprintf("dataset %q belongs to writer %q: it is not a manual table", id, other)}
			}
		}
		if !claim && name == d.Name && schema != nil {
			if cur, err := parseSchema(schema); err == nil && cur.sameColumns(tbl) {
				return nil // unchanged
			}
		}
		var holder string
		err = tx.QueryRow(ctx, `SELECT id::text FROM `+h.intentsTable()+` WHERE dataset_id = $1 AND status = 'open'`, id).Scan(&holder)
		if err == nil {
			return &InputError{Status: http.StatusConflict, Code: CodeBusy, Msg: fmt.Sprintf("a write of the dataset is in flight (intent %s); declare again when it ends", holder)}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+h.datasetsTable()+` SET name = $2, schema = $3::jsonb, owner = $4, updated_at = now() WHERE id = $1`,
			id, d.Name, string(tbl.schemaJSON()), h.cfg.WriterID)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.info(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, info)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authorize(w, r, r.PathValue("id"), ActionRead); !ok {
		return
	}
	info, err := h.info(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (h *handler) info(ctx context.Context, id string) (DatasetInfo, error) {
	ds, err := h.cfg.Ledger.Dataset(ctx, id)
	if err != nil {
		return DatasetInfo{}, err
	}
	info := DatasetInfo{DatasetID: ds.ID, Name: ds.Name, RowCount: ds.RowCount, Status: ds.Status, Sink: string(ds.Sink), Columns: []Column{}}
	if !ds.SourceWatermark.IsZero() {
		wm := ds.SourceWatermark.UTC()
		info.SourceWatermark = &wm
	}
	if ds.Schema != nil {
		var s Schema
		if err := json.Unmarshal(ds.Schema, &s); err == nil && s.Columns != nil {
			info.Columns = s.Columns
		}
	}
	return info, nil
}

// upload replaces (or appends to) a manual table with the request body.
func (h *handler) upload(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	start := time.Now()
	id := r.PathValue("id")
	principal, ok := h.authorize(w, r, id, ActionWrite)
	if !ok {
		return
	}

	mode := facade.Replace
	switch m := r.URL.Query().Get("mode"); m {
	case "", "replace":
	case "append":
		mode = facade.Append
	default:
		h.fail(w, r, badInput(http.StatusBadRequest, CodeBadRequest, 0, "", "mode %q: want replace (the default) or append", m))
		return
	}
	allowEmpty := false
	switch v := r.URL.Query().Get("allow_empty"); v {
	case "", "false":
	case "true":
		allowEmpty = true
	default:
		h.fail(w, r, badInput(http.StatusBadRequest, CodeBadRequest, 0, "", "allow_empty %q: want true or false", v))
		return
	}
	form, ierr := mediaFormat(r.Header.Get("Content-Type"))
	if ierr != nil {
		h.fail(w, r, ierr)
		return
	}
	if r.ContentLength > h.cfg.MaxUploadBytes {
		h.fail(w, r, badInput(http.StatusRequestEntityTooLarge, CodeTooLarge, 0, "", "request body is larger than %d bytes", h.cfg.MaxUploadBytes))
		return
	}
	body := http.MaxBytesReader(w, stallGuard(w, r.Body, h.cfg.BodyStallTimeout), h.cfg.MaxUploadBytes)

	ds, err := h.cfg.Ledger.Dataset(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if ds.Schema == nil || ds.Owner != h.cfg.WriterID {
		h.fail(w, r, badInput(http.StatusConflict, CodeNotManual, 0, "", "dataset %q is not a declared manual table: declare it with PUT /datasets/%s first", id, id))
		return
	}
	tbl, err := parseSchema(ds.Schema)
	if err != nil {
		h.fail(w, r, badInput(http.StatusConflict, CodeNotManual, 0, "", "dataset %q: %v", id, err))
		return
	}
	// Check the CSV header before opening an intent.
	var src rowReader
	if form == formatCSV {
		if src, err = newCSVReader(body, tbl); err != nil {
			h.fail(w, r, err)
			return
		}
	} else {
		src = newNDJSONReader(body, tbl, h.cfg.MaxLineBytes)
	}
	up := &upload{mem: h.cfg.Allocator, schema: tbl.arrowSchema(), tbl: tbl, src: src, batchRows: h.cfg.BatchRows,
		requireRows: mode == facade.Replace && !allowEmpty}
	meta := map[string]string{"source": "manualtable", "content-type": form.String()}
	if principal != "" {
		meta["uploaded-by"] = principal
	}

	var (
		txnID   string
		res     facade.CommitResult
		written bool
	)
	_, err = h.cfg.Ledger.With(ctx, ledger.OpenParams{
		DatasetID: id, WriterID: h.cfg.WriterID, Sink: sink.Iceberg, WriteMode: mode, Lookup: h.lookup, Actor: principal,
	}, func(ctx context.Context, in *ledger.Intent) (ledger.Outcome, error) {
		txnID = in.ID
		if err := h.checkDeclaration(ctx, id, tbl); err != nil {
			return ledger.Outcome{}, err
		}
		staged, err := h.cfg.Lakehouse.Stage(ctx,
			facade.Target{DatasetID: id, WriterID: h.cfg.WriterID, Workspace: h.cfg.Workspace},
			facade.WriteRequest{
				Mode:     mode,
				Schema:   up.schema,
				Rows:     up.Rows(),
				TxnID:    in.ID,
				Metadata: meta,
			})
		switch {
		case err == nil && up.err != nil:
			// A lakehouse that did not see the input fail: commit nothing.
			err = staged.Abort(context.WithoutCancel(ctx))
		case err == nil:
			res, err = writestrategy.CommitStaged(ctx, h.cfg.Ledger, in, staged, tbl.schemaJSON())
		}
		switch {
		case up.err != nil:
			return ledger.Outcome{}, up.err
		case errors.Is(err, facade.ErrCommitStateUnknown):
			return ledger.Outcome{}, &outcomeUnknownError{err}
		case err != nil:
			return ledger.Outcome{}, err
		}
		written = true
		return ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt, Schema: tbl.schemaJSON()}, nil
	})
	if err != nil {
		if written && !errors.Is(err, ledger.ErrVetoed) {
			// The snapshot is in the table; only the ledger commit failed.
			err = &outcomeUnknownError{fmt.Errorf("rows written (snapshot %d) but the ledger commit failed: %w", res.SnapshotID, err)}
		}
		h.failTxn(w, r, err, txnID)
		return
	}
	h.cfg.Logger.InfoContext(ctx, "manualtable upload committed", "dataset_id", id, "txn_id", txnID, "mode", mode, "uploaded_by", principal,
		"rows", res.Rows, "snapshot_id", res.SnapshotID, "data_files", len(res.DataFiles), "duration", time.Since(start))
	writeJSON(w, http.StatusOK, Result{
		DatasetID: id, TxnID: txnID, Mode: string(mode), Rows: res.Rows, SnapshotID: res.SnapshotID,
		CommittedAt: res.CommittedAt.UTC(), DataFiles: len(res.DataFiles),
	})
}

// lookup reconciles an upload whose writer died (or whose commit outcome
// was unknown): it landed when a snapshot of the table carries its
// transaction id. A manual table's declared schema is already on the
// dataset, so the roll-forward keeps it.
func (h *handler) lookup(ctx context.Context, in ledger.Intent) (ledger.Landing, error) {
	res, found, err := h.cfg.Lakehouse.FindTxn(ctx, in.DatasetID, in.ID)
	if err != nil || !found {
		return ledger.Landing{}, err
	}
	return ledger.Landing{Landed: true, Outcome: ledger.Outcome{RowCount: res.Rows, SnapshotID: res.SnapshotID, CommittedAt: res.CommittedAt}}, nil
}

// checkDeclaration re-reads the declaration under a share lock once the
// intent is open: a concurrent PUT either committed before (and the upload
// parsed the old declaration: 409) or sees the open intent and refuses.
func (h *handler) checkDeclaration(ctx context.Context, id string, tbl *table) error {
	var schema []byte
	if err := h.cfg.DB.QueryRow(ctx, `SELECT schema FROM `+h.datasetsTable()+` WHERE id = $1 FOR SHARE`, id).Scan(&schema); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", ledger.ErrDatasetNotFound, id)
		}
		return fmt.Errorf("manualtable: read declaration of %q: %w", id, err)
	}
	cur, err := parseSchema(schema)
	if err != nil || !cur.sameColumns(tbl) {
		return badInput(http.StatusConflict, CodeSchemaChanged, 0, "", "the declared columns of %q changed while the upload started; retry", id)
	}
	return nil
}

// mediaFormat maps a Content-Type to an upload format.
func mediaFormat(ct string) (format, *InputError) {
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil {
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return 0, badInput(http.StatusUnsupportedMediaType, CodeUnsupported, 0, "", "charset %q: only utf-8 is accepted", cs)
		}
		switch mt {
		case "text/csv":
			return formatCSV, nil
		case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines", "application/jsonlines":
			return formatNDJSON, nil
		}
	}
	return 0, badInput(http.StatusUnsupportedMediaType, CodeUnsupported, 0, "", "Content-Type %q: want text/csv or application/x-ndjson", ct)
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) { h.failTxn(w, r, err, "") }

// failTxn answers err as a problem document: client errors (typed) as
// 4xx, the rest as 5xx.
func (h *handler) failTxn(w http.ResponseWriter, r *http.Request, err error, txnID string) {
	status, body := classify(err)
	body.TxnID = txnID
	body.Status = status
	body.Title = http.StatusText(status)
	body.Type = ProblemTypePrefix + body.Code
	body.Instance = r.URL.Path
	if status >= 500 {
		h.cfg.Logger.ErrorContext(r.Context(), "manualtable request failed", "method", r.Method, "path", r.URL.Path,
			"status", status, "code", body.Code, "txn_id", txnID, "error", err)
	} else {
		h.cfg.Logger.InfoContext(r.Context(), "manualtable request rejected", "method", r.Method, "path", r.URL.Path,
			"status", status, "code", body.Code, "txn_id", txnID, "error", err)
	}
	if status == http.StatusConflict && body.Code == CodeBusy {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func classify(err error) (int, Problem) {
	var ie *InputError
	var sm *facade.SchemaMismatchError
	var ou *outcomeUnknownError
	switch {
	case errors.As(err, &ie):
		return ie.Status, Problem{Detail: ie.Error(), Code: ie.Code, Line: ie.Line, Column: ie.Column}
	case errors.As(err, &ou):
		return http.StatusServiceUnavailable, Problem{Detail: "the write's outcome is unknown; the ledger intent is left open for reconciliation: " + err.Error(), Code: CodeOutcomeUnknown}
	case errors.Is(err, ledger.ErrDatasetNotFound):
		return http.StatusNotFound, Problem{Detail: err.Error(), Code: CodeUnknownDataset}
	case errors.Is(err, ledger.ErrBusy):
		return http.StatusConflict, Problem{Detail: err.Error(), Code: CodeBusy}
	case errors.Is(err, ledger.ErrNotOwner):
		return http.StatusConflict, Problem{Detail: err.Error(), Code: CodeNotManual}
	case errors.Is(err, facade.ErrCommitConflict):
		return http.StatusConflict, Problem{Detail: err.Error(), Code: CodeConflict}
	case errors.As(err, &sm):
		return http.StatusConflict, Problem{Detail: err.Error(), Code: CodeSchemaMismatch}
	case errors.Is(err, facade.ErrSchemaChange), errors.Is(err, facade.ErrRowIDVersion):
		return http.StatusConflict, Problem{Detail: err.Error(), Code: CodeSchemaMismatch}
	case errors.Is(err, facade.ErrInvalidDatasetID):
		return http.StatusBadRequest, Problem{Detail: err.Error(), Code: CodeBadRequest}
	case errors.Is(err, ledger.ErrVetoed):
		return http.StatusUnprocessableEntity, Problem{Detail: err.Error(), Code: CodeVetoed}
	case errors.Is(err, facade.ErrPartitionOrder):
		return http.StatusUnprocessableEntity, Problem{Code: CodePartitionOrder,
			Detail: "the table is partitioned and the upload's rows are not grouped by partition: send the rows of each partition together " +
				"(for example sorted by the partition columns); nothing was written: " + err.Error()}
	}
	return http.StatusInternalServerError, Problem{Detail: err.Error(), Code: CodeWriteFailed}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
