package writestrategy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakewrite/lakewrite/ledger"
	"github.com/lakewrite/lakewrite/sink"
	"github.com/lakewrite/lakewrite/writestrategy/sliced"
)

// Errors of registered relations; match them with errors.Is.
var (
	// ErrRelationDataset: a write (Dispatcher.Write, Dispatcher.Load,
	// Apply) targets a dataset registered over a Postgres relation, which
	// lakewrite only reads. Nothing was written.
	ErrRelationDataset = errors.New("writestrategy: dataset is a registered Postgres relation and cannot be written")
	// ErrRelationChanged: the columns of a registered relation differ from
	// those declared when it was registered (a view was redefined, a
	// column added or dropped). Register it again to declare them.
	ErrRelationChanged = errors.New("writestrategy: registered relation's columns changed")
	// errRelationConflict: RegisterRelation was asked to register a dataset
	// that already holds written contents (in the row store or Iceberg) or
	// has a write in flight (an open intent).
	errRelationConflict = errors.New("writestrategy: dataset already holds written contents")
)

// RegisterRelation registers dataset datasetID as a source read in place
// from an existing Postgres relation of db's database, nothing copied.
// relation is either the name of a table, view, materialized view or
// foreign table (optionally schema-qualified; unquoted parts fold to lower
// case as in SQL, "quoted" parts are kept as written), or a single query
// (SELECT, WITH ... SELECT, VALUES or TABLE; trusted SQL text without
// parameters). The relation's columns are described without running it and
// stored as the dataset's declared schema; the dataset's storage becomes
// sink.Relation.
//
// Every strategy reads such a source as SELECT of its columns FROM the
// relation inside the write's own transaction: a snapshot read of the
// relation as it is then, so changes to a table or view are seen by the
// next write. Its recorded row count is 0 (unknown), so the cross-join
// preflight does not limit it. A delta read of it is refused (the relation
// has no ledger transactions), and so is every write to it
// (ErrRelationDataset). When the relation's columns no longer match the
// declared ones, reads fail with ErrRelationChanged until it is registered
// again.
//
// Registering again updates the relation and its schema. A dataset that
// already holds written contents (or has a write in flight) is refused; one
// registered but never written (ledger EnsureDataset) becomes the relation.
// db may be a pgx.Tx: the registration then commits with the caller's
// transaction (it runs in a savepoint of it). env may be nil (control-plane
// schema "lakewrite"). It returns the declared schema.
func RegisterRelation(ctx context.Context, db ledger.DB, env *Env, datasetID, relation string) (Schema, error) {
	var s Schema
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		s, err = registerRelationTx(ctx, tx, env, datasetID, relation)
		return err
	})
	return s, err
}

// registerRelationTx is RegisterRelation inside tx.
func registerRelationTx(ctx context.Context, tx pgx.Tx, env *Env, datasetID, relation string) (Schema, error) {
	if env == nil {
		env = &Env{}
	}
	if err := checkDatasetID("relation", datasetID); err != nil {
		return Schema{}, err
	}
	rel, err := normalizeRelation(ctx, tx, relation)
	if err != nil {
		return Schema{}, err
	}
	s, err := describeRelation(ctx, tx, rel)
	if err != nil {
		return Schema{}, err
	}
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", relationSelect(rel), nil)
	if err != nil {
		return Schema{}, queryError("describe relation", err)
	}
	if len(sd.ParamOIDs) > 0 {
		return Schema{}, fmt.Errorf("%w: relation query has parameters ($1, ...); write its values into the query", ErrInvalid)
	}
	if _, err := ParseSchema(s.JSON()); err != nil {
		return Schema{}, fmt.Errorf("relation %s: %w", rel, err)
	}
	var prev *string
	err = tx.QueryRow(ctx, `WITH up AS (
			INSERT INTO `+env.ctlSchema()+`.datasets AS d (id, name, schema, sink, relation, status)
			VALUES ($1, $1, $2::pg_catalog.jsonb, $3, $4, 'active')
			ON CONFLICT (id) DO UPDATE SET schema = excluded.schema, sink = excluded.sink, relation = excluded.relation,
				status = 'active', updated_at = now()
			WHERE (d.sink IS NULL OR d.sink = $3)
				AND NOT EXISTS (SELECT 1 FROM `+env.ctlSchema()+`.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open')
			RETURNING 1)
		SELECT CASE WHEN EXISTS (SELECT 1 FROM up) THEN NULL
			WHEN EXISTS (SELECT 1 FROM `+env.ctlSchema()+`.pipeline_build_transactions WHERE dataset_id = $1 AND status = 'open') THEN 'open'
			ELSE (SELECT coalesce(sink, '') FROM `+env.ctlSchema()+`.datasets WHERE id = $1) END`,
		datasetID, string(s.JSON()), sink.Relation, rel).Scan(&prev)
	if err != nil {
		return Schema{}, queryError("register relation", err)
	}
	if prev != nil && *prev == "open" {
		return Schema{}, fmt.Errorf("%w: %q has a write in flight; register the relation once it has finished, or under another id", errRelationConflict, datasetID)
	}
	if prev != nil {
		return Schema{}, fmt.Errorf("%w: %q lives in %s; register the relation under another id", errRelationConflict, datasetID, *prev)
	}
	return s, nil
}

// normalizeRelation checks relation and returns the text stored for it: a
// quoted qualified name of an existing relation, or the query as given.
func normalizeRelation(ctx context.Context, tx pgx.Tx, relation string) (string, error) {
	text := strings.TrimSpace(relation)
	if text == "" {
		return "", fmt.Errorf("%w: relation is empty", ErrInvalid)
	}
	if isQuery(text) {
		return text, nil
	}
	parts, err := parseQualifiedName(text)
	if err != nil {
		return "", err
	}
	q := pgx.Identifier(parts).Sanitize()
	// The relation is stored schema-qualified, as it resolves now: later
	// reads (on any session, whatever its search_path) read this one.
	var kind, persistence, nsp, name *string
	if err := tx.QueryRow(ctx, `SELECT c.relkind::pg_catalog.text, c.relpersistence::pg_catalog.text, n.nspname::pg_catalog.text, c.relname::pg_catalog.text
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = to_regclass($1)`, q).Scan(&kind, &persistence, &nsp, &name); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", queryError("look up relation", err)
	}
	if kind == nil {
		return "", fmt.Errorf("%w: relation %s does not exist (or is not visible on the search path)", ErrInvalid, q)
	}
	if *persistence == "t" {
		return "", fmt.Errorf("%w: %s is a temporary table, which other sessions cannot read", ErrInvalid, q)
	}
	switch *kind {
	case "r", "v", "m", "f", "p":
		return pgx.Identifier{*nsp, *name}.Sanitize(), nil
	}
	return "", fmt.Errorf("%w: %s is not a table, view, materialized view or foreign table (relkind %s)", ErrInvalid, q, *kind)
}

// isQuery reports whether text starts with a keyword of a query.
func isQuery(text string) bool {
	word := text
	if i := strings.IndexFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '$' || r == '"' || r == '.')
	}); i >= 0 {
		word = text[:i]
	}
	switch strings.ToLower(word) {
	case "select", "with", "values", "table":
		return true
	}
	return strings.HasPrefix(text, "(")
}

// parseQualifiedName splits name ("t", "s.t", `"My Schema"."T"`) into its
// parts as Postgres reads them: unquoted parts fold to lower case.
func parseQualifiedName(name string) ([]string, error) {
	var parts []string
	rest := name
	for {
		var part string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(rest[i:], '"')
				if j < 0 {
					return nil, identifierError("relation", name, "unterminated quoted identifier")
				}
				b.WriteString(rest[i : i+j])
				i += j + 1
				if i < len(rest) && rest[i] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			part, rest = b.String(), rest[i:]
		} else {
			i := 0
			for i < len(rest) {
				c := rest[i]
				if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '$') {
					i++
					continue
				}
				break
			}
			if i == 0 {
				return nil, identifierError("relation", name, "not a (schema-qualified) relation name or a query")
			}
			part, rest = strings.ToLower(rest[:i]), rest[i:]
		}
		if err := checkIdent("relation", part); err != nil {
			return nil, err
		}
		parts = append(parts, part)
		if rest == "" {
			break
		}
		if rest[0] != '.' || len(parts) == 3 {
			return nil, identifierError("relation", name, "not a (schema-qualified) relation name or a query")
		}
		rest = rest[1:]
	}
	if len(parts) > 2 {
		return nil, identifierError("relation", name, "at most schema.name")
	}
	return parts, nil
}

// relationSelect is the SELECT of every column of a stored relation: a
// subquery, so a query must be a single SELECT (a data-modifying WITH or a
// second statement is refused by the server).
func relationSelect(rel string) string {
	return "SELECT * FROM " + relationFrom(rel) + " r"
}

// relationFrom is a stored relation as a FROM item (without its alias): a
// quoted name as it is, a query parenthesized.
func relationFrom(rel string) string {
	if isQuery(rel) {
		return "(" + rel + "\n)"
	}
	return rel
}

// describeRelation returns the columns of a stored relation without
// running it: inside the write's transaction, which then holds the
// relation's lock from the check of its columns to the read of its rows.
func describeRelation(ctx context.Context, tx pgx.Tx, rel string) (Schema, error) {
	s, _, _, err := describeTypes(ctx, tx, relationSelect(rel), false)
	if err != nil {
		var qe *QueryError
		if errors.As(err, &qe) {
			return Schema{}, &QueryError{op: "describe relation", err: qe.err}
		}
		return Schema{}, err
	}
	return s, nil
}

// relationRelation reads a registered relation in place, checking first
// that its columns are still the declared ones.
func relationRelation(ctx context.Context, tx pgx.Tx, datasetID, rel string, s Schema) (*relation, error) {
	now, err := describeRelation(ctx, tx, rel)
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", datasetID, err)
	}
	if !sameSchema(now, s) {
		return nil, fmt.Errorf("%w: dataset %q was registered with columns %s, relation now has %s; register it again",
			ErrRelationChanged, datasetID, schemaText(s), schemaText(now))
	}
	from := func(b *builder, rg *sliced.Range) string {
		sql := "(SELECT " + (&relation{schema: s}).cols("r") + `, row_number() OVER () AS "__ord" FROM ` + relationFrom(rel) + " r"
		if rg != nil {
			sql += " WHERE r.ctid >= " + b.param(fmt.Sprintf("(%d,0)", rg.Lo)) + "::pg_catalog.tid"
			if rg.Hi >= 0 {
				sql += " AND r.ctid < " + b.param(fmt.Sprintf("(%d,0)", rg.Hi)) + "::pg_catalog.tid"
			}
		}
		return sql + ")"
	}
	r := &relation{datasetID: datasetID, schema: s, scanOrder: true, render: func(b *builder) string { return from(b, nil) }}
	if !isQuery(rel) {
		r.table = rel
		r.slice = &sliceable{src: sliced.Source{Table: rel}, at: func(rg sliced.Range) *relation {
			out := *r
			out.slice = nil
			out.render = func(b *builder) string { return from(b, &rg) }
			return &out
		}}
	}
	return r, nil
}

func sameSchema(a, b Schema) bool {
	if len(a.Columns) != len(b.Columns) {
		return false
	}
	for i := range a.Columns {
		if a.Columns[i] != b.Columns[i] {
			return false
		}
	}
	return true
}

func schemaText(s Schema) string {
	parts := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		parts[i] = c.Name + " " + c.Type
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// refuseRelationOutputs refuses a write whose outputs include a registered
// relation.
func refuseRelationOutputs(ds map[string]datasetRow, outs []string) error {
	for _, o := range outs {
		if ds[o].sink == sink.Relation {
			return fmt.Errorf("%w: %q", ErrRelationDataset, o)
		}
	}
	return nil
}
