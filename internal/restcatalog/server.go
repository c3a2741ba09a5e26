package restcatalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
)

// Config configures a Server.
type Config struct {
	// Warehouse is the root location of new tables: a file:// URL or an
	// object-store URL such as s3://bucket/path. Required.
	Warehouse string
	// WarehouseName, when set, is the only name a client may ask for with
	// GET /v1/config?warehouse=; another name is a 404. Empty: any.
	WarehouseName string
	// IOProps configure the server's own file IO (the one that writes the
	// metadata files), e.g. the S3 endpoint and credentials.
	IOProps iceberg.Properties
	// Prefix, when set, is returned as the "prefix" override of
	// /v1/config and every catalog route lives under /v1/{prefix}/.
	Prefix string
	// Defaults and Overrides are added to the /v1/config answer.
	Defaults, Overrides iceberg.Properties
	// TableConfig is returned as the "config" of every load and create
	// table answer (for example the S3 settings the client's file IO
	// needs, as a catalog service vends them).
	TableConfig iceberg.Properties
	// Clients enables OAuth2: client id -> secret, exchanged for a bearer
	// token at POST /v1/oauth/tokens.
	Clients map[string]string
	// Tokens are static bearer tokens accepted as well (as configured on a
	// client with rest.WithOAuthToken).
	Tokens []string
}

// Server is a running REST catalog. Its methods are safe for concurrent
// use.
type Server struct {
	cfg       Config
	http      *httptest.Server
	warehouse string

	mu         sync.Mutex
	namespaces map[string]*namespace
	tables     map[string]*tableEntry
	tokens     map[string]string // token -> client id ("" for a static token)
	forbidden  map[string]bool
	faults     []*Fault
	counts     map[Op]int
}

// Start starts a server on a loopback port; it is closed when the test
// ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a server; the caller closes it.
func New(cfg Config) (*Server, error) {
	if cfg.Warehouse == "" {
		return nil, errors.New("restcatalog: Config.Warehouse is required")
	}
	s := &Server{
		cfg:        cfg,
		warehouse:  strings.TrimSuffix(cfg.Warehouse, "/"),
		namespaces: map[string]*namespace{},
		tables:     map[string]*tableEntry{},
		tokens:     map[string]string{},
		forbidden:  map[string]bool{},
		counts:     map[Op]int{},
	}
	for _, tok := range cfg.Tokens {
		s.tokens[tok] = ""
	}
	s.http = httptest.NewServer(http.HandlerFunc(s.serve))
	return s, nil
}

// URL is the catalog URI to give the client (rest.NewCatalog).
func (s *Server) URL() string { return s.http.URL }

// Close shuts the server down.
func (s *Server) Close() { s.http.Close() }

// RevokeTokens invalidates every token issued so far (static tokens
// included): later requests carrying one get 401, as with an expired or
// revoked token.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// Forbid makes every catalog request of clientID's tokens a 403.
func (s *Server) Forbid(clientID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbidden[clientID] = true
}

// Count is the number of requests of op the server received (faulted
// ones included).
func (s *Server) Count(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// MetadataLocation is the current metadata file of a table ("" when the
// table does not exist).
func (s *Server) MetadataLocation(namespace []string, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.tables[tableKey(namespace, name)]; e != nil {
		return e.loc
	}
	return ""
}

// request is one parsed catalog request.
type request struct {
	op     Op
	method string
	ns     []string // namespace path parameter
	table  string   // table path parameter
	query  url.Values
	body   []byte
	// subjects are the table names the request is about (for faults).
	subjects []string
}

// errorModel is the spec's ErrorModel, sent as {"error": ...}.
type errorModel struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}

// httpError is an error with its REST status and exception type.
type httpError struct {
	code int
	typ  string
	msg  string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s: %s", e.code, e.typ, e.msg) }

func errorf(code int, typ, format string, args ...any) *httpError {
	return &httpError{code: code, typ: typ, msg: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *httpError) {
	writeJSON(w, e.code, map[string]errorModel{"error": {Message: e.msg, Type: e.typ, Code: e.code}})
}

// response is what a handler produced: a status and a JSON body (nil for
// no content).
type response struct {
	code int
	body any
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "BadRequestException", "read body: %v", err))
		return
	}
	if r.URL.Path == "/v1/oauth/tokens" && r.Method == http.MethodPost {
		s.count(OpGetToken)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.token(w, r)
		return
	}
	req, herr := s.route(r, body)
	if herr != nil {
		writeError(w, herr)
		return
	}
	s.count(req.op)
	if herr := s.authorize(r); herr != nil {
		writeError(w, herr)
		return
	}
	f := s.takeFault(req)
	if f != nil && !f.After {
		s.fail(w, f, req.op)
		return
	}
	rsp, herr := s.handle(r, req)
	if f != nil {
		// The work is done (or refused on its own merits); the client
		// never learns which.
		s.fail(w, f, req.op)
		return
	}
	switch {
	case herr != nil:
		writeError(w, herr)
	case rsp.body == nil:
		w.WriteHeader(rsp.code)
	default:
		writeJSON(w, rsp.code, rsp.body)
	}
}

func (s *Server) count(op Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[op]++
}

// route parses the path into an operation and its parameters. The
// namespace parameter is split on the unit separator (0x1F), the spec's
// default namespace separator.
func (s *Server) route(r *http.Request, body []byte) (*request, *httpError) {
	req := &request{method: r.Method, query: r.URL.Query(), body: body}
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, seg := range segs {
		u, err := url.PathUnescape(seg)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "BadRequestException", "bad path segment %q", seg)
		}
		segs[i] = u
	}
	notFound := errorf(http.StatusNotFound, "NotFoundException", "no route for %s %s", r.Method, r.URL.Path)
	if len(segs) < 2 || segs[0] != "v1" {
		return nil, notFound
	}
	segs = segs[1:]
	if len(segs) == 1 && segs[0] == "config" && r.Method == http.MethodGet {
		req.op = OpGetConfig
		return req, nil
	}
	if s.cfg.Prefix != "" {
		if segs[0] != s.cfg.Prefix {
			return nil, notFound
		}
		segs = segs[1:]
	}
	m := r.Method
	switch {
	case len(segs) == 1 && segs[0] == "namespaces":
		req.op = map[string]Op{http.MethodGet: OpListNamespaces, http.MethodPost: OpCreateNamespace}[m]
	case len(segs) == 2 && segs[0] == "namespaces":
		req.op = map[string]Op{http.MethodGet: OpLoadNamespace, http.MethodHead: OpNamespaceExists,
			http.MethodDelete: OpDropNamespace}[m]
	case len(segs) == 3 && segs[0] == "namespaces" && segs[2] == "properties" && m == http.MethodPost:
		req.op = OpUpdateProperties
	case len(segs) == 3 && segs[0] == "namespaces" && segs[2] == "tables":
		req.op = map[string]Op{http.MethodGet: OpListTables, http.MethodPost: OpCreateTable}[m]
	case len(segs) == 4 && segs[0] == "namespaces" && segs[2] == "tables":
		req.op = map[string]Op{http.MethodGet: OpLoadTable, http.MethodHead: OpTableExists,
			http.MethodPost: OpCommitTable, http.MethodDelete: OpDropTable}[m]
		req.table = segs[3]
	case len(segs) == 5 && segs[0] == "namespaces" && segs[2] == "tables" && segs[4] == "metrics" && m == http.MethodPost:
		req.op = OpReportMetrics
		req.table = segs[3]
	case len(segs) == 2 && segs[0] == "tables" && segs[1] == "rename" && m == http.MethodPost:
		req.op = OpRenameTable
	case len(segs) == 2 && segs[0] == "transactions" && segs[1] == "commit" && m == http.MethodPost:
		req.op = OpCommitTransaction
	}
	if req.op == "" {
		return nil, notFound
	}
	if len(segs) >= 2 && segs[0] == "namespaces" {
		req.ns = splitNamespace(segs[1])
	}
	req.subjects = s.subjects(req)
	return req, nil
}

func splitNamespace(s string) []string { return strings.Split(s, "\x1f") }

// subjects names the tables a request is about, for Fault.Table.
func (s *Server) subjects(req *request) []string {
	switch req.op {
	case OpRenameTable:
		var p renameRequest
		if json.Unmarshal(req.body, &p) == nil {
			return []string{p.Source.Name, p.Destination.Name}
		}
	case OpCreateTable:
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(req.body, &p) == nil {
			return []string{p.Name}
		}
	case OpCommitTransaction:
		var p struct {
			Changes []struct {
				Identifier identifier `json:"identifier"`
			} `json:"table-changes"`
		}
		if json.Unmarshal(req.body, &p) == nil {
			var out []string
			for _, c := range p.Changes {
				out = append(out, c.Identifier.Name)
			}
			return out
		}
	}
	if req.table != "" {
		return []string{req.table}
	}
	return nil
}

func (s *Server) handle(r *http.Request, req *request) (response, *httpError) {
	switch req.op {
	case OpGetConfig:
		return s.config(req)
	case OpListNamespaces:
		return s.listNamespaces(req)
	case OpCreateNamespace:
		return s.createNamespace(req)
	case OpLoadNamespace:
		return s.loadNamespace(req)
	case OpNamespaceExists:
		return s.namespaceExists(req)
	case OpDropNamespace:
		return s.dropNamespace(req)
	case OpUpdateProperties:
		return s.updateProperties(req)
	case OpListTables:
		return s.listTables(req)
	case OpCreateTable:
		return s.createTable(r.Context(), req)
	case OpLoadTable:
		return s.loadTable(req)
	case OpTableExists:
		return s.tableExists(req)
	case OpDropTable:
		return s.dropTable(req)
	case OpCommitTable:
		return s.commitTable(r.Context(), req)
	case OpRenameTable:
		return s.renameTable(req)
	case OpCommitTransaction:
		return s.commitTransaction(r.Context(), req)
	case OpReportMetrics:
		return response{code: http.StatusNoContent}, nil
	}
	return response{}, errorf(http.StatusNotFound, "NotFoundException", "unknown operation %s", req.op)
}

// endpoints is the capability list of /v1/config, in the spec's
// "<verb> <path>" form.
var endpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"DELETE /v1/{prefix}/namespaces/{namespace}",
	"POST /v1/{prefix}/namespaces/{namespace}/properties",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
	"POST /v1/{prefix}/tables/rename",
	"POST /v1/{prefix}/transactions/commit",
}

func (s *Server) config(req *request) (response, *httpError) {
	if wh := req.query.Get("warehouse"); wh != "" && s.cfg.WarehouseName != "" && wh != s.cfg.WarehouseName {
		return response{}, errorf(http.StatusNotFound, "NoSuchWarehouseException", "warehouse %q does not exist", wh)
	}
	defaults := iceberg.Properties{}
	maps.Copy(defaults, s.cfg.Defaults)
	overrides := iceberg.Properties{}
	maps.Copy(overrides, s.cfg.Overrides)
	if s.cfg.Prefix != "" {
		overrides["prefix"] = s.cfg.Prefix
	}
	return response{code: http.StatusOK, body: map[string]any{
		"defaults": defaults, "overrides": overrides, "endpoints": endpoints,
	}}, nil
}
