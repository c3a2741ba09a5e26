package restcatalog

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

type namespace struct {
	levels []string
	props  iceberg.Properties
}

type tableEntry struct {
	ns      []string
	name    string
	meta    table.Metadata
	loc     string // current metadata file
	version int    // version number of loc
}

type identifier struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func nsKey(ns []string) string { return strings.Join(ns, "\x1f") }

func tableKey(ns []string, name string) string { return nsKey(ns) + "\x00" + name }

func badRequest(format string, args ...any) *httpError {
	return errorf(http.StatusBadRequest, "BadRequestException", format, args...)
}

func noSuchNamespace(ns []string) *httpError {
	return errorf(http.StatusNotFound, "NoSuchNamespaceException", "namespace %s does not exist", strings.Join(ns, "."))
}

func noSuchTable(ns []string, name string) *httpError {
	return errorf(http.StatusNotFound, "NoSuchTableException", "table %s.%s does not exist", strings.Join(ns, "."), name)
}

func decode(body []byte, v any) *httpError {
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("malformed request body: %v", err)
	}
	return nil
}

// page applies pageToken (an offset) and pageSize to a sorted list.
func page[T any](items []T, q map[string][]string) ([]T, string, *httpError) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	from := 0
	if tok := get("pageToken"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(items) {
			return nil, "", badRequest("bad pageToken %q", tok)
		}
		from = n
	}
	to := len(items)
	if sz := get("pageSize"); sz != "" {
		n, err := strconv.Atoi(sz)
		if err != nil || n < 1 {
			return nil, "", badRequest("bad pageSize %q", sz)
		}
		to = min(from+n, len(items))
	}
	next := ""
	if to < len(items) {
		next = strconv.Itoa(to)
	}
	return items[from:to], next, nil
}

func (s *Server) listNamespaces(req *request) (response, *httpError) {
	var parent []string
	if p := req.query.Get("parent"); p != "" {
		parent = splitNamespace(p)
	}
	s.mu.Lock()
	if parent != nil && s.namespaces[nsKey(parent)] == nil {
		s.mu.Unlock()
		return response{}, noSuchNamespace(parent)
	}
	seen := map[string][]string{}
	for _, n := range s.namespaces {
		if len(n.levels) > len(parent) && slices.Equal(n.levels[:len(parent)], parent) {
			child := n.levels[:len(parent)+1]
			seen[nsKey(child)] = child
		}
	}
	s.mu.Unlock()
	keys := slices.Sorted(maps.Keys(seen))
	keys, next, herr := page(keys, req.query)
	if herr != nil {
		return response{}, herr
	}
	out := make([][]string, len(keys))
	for i, k := range keys {
		out[i] = seen[k]
	}
	body := map[string]any{"namespaces": out}
	if next != "" {
		body["next-page-token"] = next
	}
	return response{code: http.StatusOK, body: body}, nil
}

func (s *Server) createNamespace(req *request) (response, *httpError) {
	var p struct {
		Namespace  []string           `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if herr := decode(req.body, &p); herr != nil {
		return response{}, herr
	}
	if len(p.Namespace) == 0 {
		return response{}, badRequest("empty namespace")
	}
	props := iceberg.Properties{}
	maps.Copy(props, p.Properties)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := nsKey(p.Namespace)
	if s.namespaces[k] != nil {
		return response{}, errorf(http.StatusConflict, "AlreadyExistsException", "namespace %s already exists", strings.Join(p.Namespace, "."))
	}
	s.namespaces[k] = &namespace{levels: slices.Clone(p.Namespace), props: props}
	return response{code: http.StatusOK, body: map[string]any{"namespace": p.Namespace, "properties": props}}, nil
}

func (s *Server) loadNamespace(req *request) (response, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.namespaces[nsKey(req.ns)]
	if n == nil {
		return response{}, noSuchNamespace(req.ns)
	}
	return response{code: http.StatusOK, body: map[string]any{"namespace": n.levels, "properties": maps.Clone(n.props)}}, nil
}

func (s *Server) namespaceExists(req *request) (response, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namespaces[nsKey(req.ns)] == nil {
		return response{}, noSuchNamespace(req.ns)
	}
	return response{code: http.StatusNoContent}, nil
}

func (s *Server) dropNamespace(req *request) (response, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := nsKey(req.ns)
	if s.namespaces[k] == nil {
		return response{}, noSuchNamespace(req.ns)
	}
	for _, e := range s.tables {
		if nsKey(e.ns) == k {
			return response{}, errorf(http.StatusConflict, "NamespaceNotEmptyException", "namespace %s holds tables", strings.Join(req.ns, "."))
		}
	}
	delete(s.namespaces, k)
	return response{code: http.StatusNoContent}, nil
}

func (s *Server) updateProperties(req *request) (response, *httpError) {
	var p struct {
		Removals []string           `json:"removals"`
		Updates  iceberg.Properties `json:"updates"`
	}
	if herr := decode(req.body, &p); herr != nil {
		return response{}, herr
	}
	for _, k := range p.Removals {
		if _, ok := p.Updates[k]; ok {
			return response{}, errorf(http.StatusUnprocessableEntity, "UnprocessableEntityException", "key %q both removed and updated", k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.namespaces[nsKey(req.ns)]
	if n == nil {
		return response{}, noSuchNamespace(req.ns)
	}
	updated, removed, missing := []string{}, []string{}, []string{}
	for _, k := range p.Removals {
		if _, ok := n.props[k]; ok {
			delete(n.props, k)
			removed = append(removed, k)
		} else {
			missing = append(missing, k)
		}
	}
	for k, v := range p.Updates {
		n.props[k] = v
		updated = append(updated, k)
	}
	sort.Strings(updated)
	return response{code: http.StatusOK, body: map[string]any{"updated": updated, "removed": removed, "missing": missing}}, nil
}

func (s *Server) listTables(req *request) (response, *httpError) {
	s.mu.Lock()
	if s.namespaces[nsKey(req.ns)] == nil {
		s.mu.Unlock()
		return response{}, noSuchNamespace(req.ns)
	}
	var names []string
	for _, e := range s.tables {
		if slices.Equal(e.ns, req.ns) {
			names = append(names, e.name)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	names, next, herr := page(names, req.query)
	if herr != nil {
		return response{}, herr
	}
	ids := make([]identifier, len(names))
	for i, n := range names {
		ids[i] = identifier{Namespace: req.ns, Name: n}
	}
	body := map[string]any{"identifiers": ids}
	if next != "" {
		body["next-page-token"] = next
	}
	return response{code: http.StatusOK, body: body}, nil
}

func (s *Server) loadResult(loc string, meta table.Metadata) map[string]any {
	out := map[string]any{"metadata": meta, "config": maps.Clone(s.cfg.TableConfig)}
	if out["config"] == nil {
		out["config"] = iceberg.Properties{}
	}
	if loc != "" {
		out["metadata-location"] = loc
	}
	return out
}

// tableLocation is where a new table lives: the namespace's "location"
// property, else <warehouse>/<namespace>.db/<table>.
func (s *Server) tableLocation(ns []string, name string) string {
	if n := s.namespaces[nsKey(ns)]; n != nil {
		if l := n.props["location"]; l != "" {
			return strings.TrimSuffix(l, "/") + "/" + name
		}
	}
	return s.warehouse + "/" + strings.Join(ns, ".") + ".db/" + name
}

func (s *Server) createTable(ctx context.Context, req *request) (response, *httpError) {
	var p struct {
		Name          string                        `json:"name"`
		Location      string                        `json:"location"`
		Schema        *iceberg.Schema               `json:"schema"`
		PartitionSpec *iceberg.UnboundPartitionSpec `json:"partition-spec"`
		WriteOrder    *table.UnboundSortOrder       `json:"write-order"`
		StageCreate   bool                          `json:"stage-create"`
		Properties    iceberg.Properties            `json:"properties"`
	}
	if herr := decode(req.body, &p); herr != nil {
		return response{}, herr
	}
	if p.Name == "" || p.Schema == nil {
		return response{}, badRequest("create table needs a name and a schema")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namespaces[nsKey(req.ns)] == nil {
		return response{}, noSuchNamespace(req.ns)
	}
	if s.tables[tableKey(req.ns, p.Name)] != nil {
		return response{}, errorf(http.StatusConflict, "AlreadyExistsException", "table %s.%s already exists", strings.Join(req.ns, "."), p.Name)
	}
	loc := strings.TrimSuffix(p.Location, "/")
	if loc == "" {
		loc = s.tableLocation(req.ns, p.Name)
	}
	spec := iceberg.UnpartitionedSpec
	if p.PartitionSpec != nil {
		spec = &p.PartitionSpec.PartitionSpec
	}
	order := table.UnsortedSortOrder
	if p.WriteOrder != nil {
		order = p.WriteOrder.SortOrder
	}
	meta, err := table.NewMetadata(p.Schema, spec, order, loc, p.Properties)
	if err != nil {
		return response{}, badRequest("create table: %v", err)
	}
	if p.StageCreate {
		// Nothing is stored: the client commits the table with an
		// assert-create requirement.
		return response{code: http.StatusOK, body: s.loadResult("", meta)}, nil
	}
	mloc, err := s.writeMetadata(ctx, meta, 0)
	if err != nil {
		return response{}, errorf(http.StatusInternalServerError, "ServerError", "write metadata: %v", err)
	}
	s.tables[tableKey(req.ns, p.Name)] = &tableEntry{ns: slices.Clone(req.ns), name: p.Name, meta: meta, loc: mloc}
	return response{code: http.StatusOK, body: s.loadResult(mloc, meta)}, nil
}

func (s *Server) loadTable(req *request) (response, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tables[tableKey(req.ns, req.table)]
	if e == nil {
		return response{}, noSuchTable(req.ns, req.table)
	}
	return response{code: http.StatusOK, body: s.loadResult(e.loc, e.meta)}, nil
}

func (s *Server) tableExists(req *request) (response, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables[tableKey(req.ns, req.table)] == nil {
		return response{}, noSuchTable(req.ns, req.table)
	}
	return response{code: http.StatusNoContent}, nil
}

// dropTable forgets the table. Its files stay where they are, whether or
// not purgeRequested is set.
func (s *Server) dropTable(req *request) (response, *httpError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tableKey(req.ns, req.table)
	if s.tables[k] == nil {
		return response{}, noSuchTable(req.ns, req.table)
	}
	delete(s.tables, k)
	return response{code: http.StatusNoContent}, nil
}

type renameRequest struct {
	Source      identifier `json:"source"`
	Destination identifier `json:"destination"`
}

func (s *Server) renameTable(req *request) (response, *httpError) {
	var p renameRequest
	if herr := decode(req.body, &p); herr != nil {
		return response{}, herr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	from := tableKey(p.Source.Namespace, p.Source.Name)
	e := s.tables[from]
	if e == nil {
		return response{}, noSuchTable(p.Source.Namespace, p.Source.Name)
	}
	if s.namespaces[nsKey(p.Destination.Namespace)] == nil {
		return response{}, noSuchNamespace(p.Destination.Namespace)
	}
	to := tableKey(p.Destination.Namespace, p.Destination.Name)
	if s.tables[to] != nil {
		return response{}, errorf(http.StatusConflict, "AlreadyExistsException", "table %s.%s already exists",
			strings.Join(p.Destination.Namespace, "."), p.Destination.Name)
	}
	delete(s.tables, from)
	e.ns, e.name = slices.Clone(p.Destination.Namespace), p.Destination.Name
	s.tables[to] = e
	return response{code: http.StatusNoContent}, nil
}

// tableChange is the spec's CommitTableRequest.
type tableChange struct {
	Identifier   *identifier        `json:"identifier"`
	Requirements table.Requirements `json:"requirements"`
	Updates      table.Updates      `json:"updates"`
}

// staged is a validated, applied table change not yet made current.
type staged struct {
	key   string
	entry *tableEntry
}

func (s *Server) commitTable(ctx context.Context, req *request) (response, *httpError) {
	var c tableChange
	if herr := decode(req.body, &c); herr != nil {
		return response{}, herr
	}
	if c.Identifier != nil && (!slices.Equal(c.Identifier.Namespace, req.ns) || c.Identifier.Name != req.table) {
		return response{}, badRequest("identifier in the body does not match the path")
	}
	c.Identifier = &identifier{Namespace: req.ns, Name: req.table}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, herr := s.stage(ctx, c)
	if herr != nil {
		return response{}, herr
	}
	s.tables[st.key] = st.entry
	return response{code: http.StatusOK, body: map[string]any{"metadata-location": st.entry.loc, "metadata": st.entry.meta}}, nil
}

// commitTransaction validates and applies every change, writes their
// metadata files, and only then swaps the tables' pointers: all or nothing.
func (s *Server) commitTransaction(ctx context.Context, req *request) (response, *httpError) {
	var p struct {
		Changes []tableChange `json:"table-changes"`
	}
	if herr := decode(req.body, &p); herr != nil {
		return response{}, herr
	}
	if len(p.Changes) == 0 {
		return response{}, badRequest("no table changes")
	}
	seen := map[string]bool{}
	for _, c := range p.Changes {
		if c.Identifier == nil {
			return response{}, badRequest("a table change without identifier")
		}
		k := tableKey(c.Identifier.Namespace, c.Identifier.Name)
		if seen[k] {
			return response{}, badRequest("table %s changed twice in one transaction", c.Identifier.Name)
		}
		seen[k] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var done []staged
	for _, c := range p.Changes {
		st, herr := s.stage(ctx, c)
		if herr != nil {
			for _, d := range done {
				s.removeFile(ctx, d.entry.meta, d.entry.loc)
			}
			return response{}, herr
		}
		done = append(done, st)
	}
	for _, d := range done {
		s.tables[d.key] = d.entry
	}
	return response{code: http.StatusNoContent}, nil
}

// stage validates c's requirements against the table's current metadata,
// applies its updates and writes the new metadata file. The caller holds
// s.mu and installs the result.
func (s *Server) stage(ctx context.Context, c tableChange) (staged, *httpError) {
	ns, name := c.Identifier.Namespace, c.Identifier.Name
	key := tableKey(ns, name)
	cur := s.tables[key]
	creating := slices.ContainsFunc(c.Requirements, func(r table.Requirement) bool { return r.GetType() == "assert-create" })
	if cur == nil && !creating {
		return staged{}, noSuchTable(ns, name)
	}
	if cur == nil && s.namespaces[nsKey(ns)] == nil {
		return staged{}, noSuchNamespace(ns)
	}
	var curMeta table.Metadata
	if cur != nil {
		curMeta = cur.meta
	}
	for _, r := range c.Requirements {
		if err := r.Validate(curMeta); err != nil {
			return staged{}, errorf(http.StatusConflict, "CommitFailedException", "requirement failed: %v", err)
		}
	}
	base, loc, version := curMeta, "", 0
	if cur != nil {
		loc, version = cur.loc, cur.version+1
	} else {
		var err error
		if base, err = table.NewMetadata(iceberg.NewSchema(0), nil, table.UnsortedSortOrder, "", nil); err != nil {
			return staged{}, errorf(http.StatusInternalServerError, "ServerError", "%v", err)
		}
	}
	meta, err := table.UpdateTableMetadata(base, c.Updates, loc)
	if err != nil {
		return staged{}, badRequest("cannot apply the updates: %v", err)
	}
	if cur != nil && meta.Equals(cur.meta) {
		return staged{key: key, entry: cur}, nil
	}
	if cur == nil && meta.Location() == "" {
		if meta, err = table.UpdateTableMetadata(meta, []table.Update{table.NewSetLocationUpdate(s.tableLocation(ns, name))}, ""); err != nil {
			return staged{}, badRequest("cannot set the table location: %v", err)
		}
	}
	mloc, err := s.writeMetadata(ctx, meta, version)
	if err != nil {
		return staged{}, errorf(http.StatusInternalServerError, "CommitStateUnknownException", "write metadata: %v", err)
	}
	return staged{key: key, entry: &tableEntry{ns: slices.Clone(ns), name: name, meta: meta, loc: mloc, version: version}}, nil
}

func (s *Server) fs(ctx context.Context, meta table.Metadata, loc string) (iceio.IO, error) {
	props := iceberg.Properties{}
	maps.Copy(props, s.cfg.IOProps)
	maps.Copy(props, meta.Properties())
	return iceio.LoadFS(ctx, props, loc)
}

// writeMetadata writes meta as version's metadata file under the table
// location and returns its location.
func (s *Server) writeMetadata(ctx context.Context, meta table.Metadata, version int) (_ string, err error) {
	provider, err := table.LoadLocationProvider(meta.Location(), meta.Properties())
	if err != nil {
		return "", err
	}
	loc, err := provider.NewTableMetadataFileLocation(version)
	if err != nil {
		return "", err
	}
	fsys, err := s.fs(ctx, meta, loc)
	if err != nil {
		return "", err
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return "", errors.New("the table's file IO cannot write")
	}
	out, err := wfs.Create(loc)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	var w io.Writer = out
	switch codec := meta.Properties().Get(table.MetadataCompressionKey, table.MetadataCompressionDefault); codec {
	case table.MetadataCompressionCodecNone:
	case table.MetadataCompressionCodecGzip:
		gz := gzip.NewWriter(out)
		defer func() {
			if cerr := gz.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		w = gz
	default:
		return "", fmt.Errorf("metadata compression %q not supported", codec)
	}
	if err := json.NewEncoder(w).Encode(meta); err != nil {
		return "", err
	}
	return loc, nil
}

func (s *Server) removeFile(ctx context.Context, meta table.Metadata, loc string) {
	if fsys, err := s.fs(ctx, meta, loc); err == nil {
		_ = fsys.Remove(loc)
	}
}
