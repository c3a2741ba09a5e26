package restcatalog

import (
	"net/http"
	"slices"
)

// Op names a REST catalog operation (the spec's operationId).
type Op string

// The operations the server serves.
const (
	OpGetConfig         Op = "getConfig"
	OpGetToken          Op = "getToken"
	OpListNamespaces    Op = "listNamespaces"
	OpCreateNamespace   Op = "createNamespace"
	OpLoadNamespace     Op = "loadNamespaceMetadata"
	OpNamespaceExists   Op = "namespaceExists"
	OpDropNamespace     Op = "dropNamespace"
	OpUpdateProperties  Op = "updateProperties"
	OpListTables        Op = "listTables"
	OpCreateTable       Op = "createTable"
	OpLoadTable         Op = "loadTable"
	OpTableExists       Op = "tableExists"
	OpDropTable         Op = "dropTable"
	OpCommitTable       Op = "updateTable"
	OpRenameTable       Op = "renameTable"
	OpCommitTransaction Op = "commitTransaction"
	OpReportMetrics     Op = "reportMetrics"
)

// Fault makes requests of one operation fail.
type Fault struct {
	Op Op
	// Table restricts the fault to requests about this table (the last
	// component of its identifier; for a transaction, any of its tables).
	// Empty: every request of Op.
	Table string
	// Status is the HTTP status answered (with an IcebergErrorResponse
	// body). Ignored when Drop is set.
	Status int
	// After: do the work first (the change lands), then answer Status or
	// drop the connection. Otherwise nothing is done.
	After bool
	// Drop closes the connection without an answer.
	Drop bool
	// Times is how many matching requests fail; 0 means 1.
	Times int
	// Then are armed when this fault fires, e.g. a failing load right
	// after a commit answered 502, for the client's reconciling read.
	Then []Fault
}

// Inject arms f. Faults fire in the order they were injected.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults disarms the faults of op for table ("" = all of op's).
func (s *Server) ClearFaults(op Op, table string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = slices.DeleteFunc(s.faults, func(f *Fault) bool {
		return f.Op == op && (table == "" || f.Table == table)
	})
}

func (s *Server) takeFault(req *request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Op != req.op || (f.Table != "" && !slices.Contains(req.subjects, f.Table)) {
			continue
		}
		f.Times--
		if f.Times == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		for _, next := range f.Then {
			if next.Times <= 0 {
				next.Times = 1
			}
			s.faults = append(s.faults, &next)
		}
		out := *f
		return &out
	}
	return nil
}

// fail answers a faulted request.
func (s *Server) fail(w http.ResponseWriter, f *Fault, op Op) {
	if f.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // closes the connection too
	}
	typ := "ServerError"
	switch {
	case f.Status == http.StatusConflict:
		typ = "CommitFailedException"
	case f.Status >= 500 && (op == OpCommitTable || op == OpCommitTransaction):
		typ = "CommitStateUnknownException"
	case f.Status == http.StatusServiceUnavailable:
		typ = "ServiceUnavailableException"
	case f.Status == http.StatusUnauthorized:
		typ = "NotAuthorizedException"
	case f.Status == http.StatusForbidden:
		typ = "ForbiddenException"
	}
	writeError(w, errorf(f.Status, typ, "injected fault (%s %d)", op, f.Status))
}
