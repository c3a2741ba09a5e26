package facade

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
)

func (c *postgresCatalog) namespaceExists(ctx context.Context, q querier, ns string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2)
		OR EXISTS (SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2)`, c.name, ns).Scan(&ok)
	return ok, err
}

// resolveNamespace returns the stored key of namespace and whether it
// exists.
func (c *postgresCatalog) resolveNamespace(ctx context.Context, q querier, namespace table.Identifier) (string, bool, error) {
	keys := namespaceStorageKeys(namespace)
	for _, k := range keys {
		ok, err := c.namespaceExists(ctx, q, k)
		if err != nil {
			return "", false, fmt.Errorf("facade: catalog namespace %s: %w", strings.Join(namespace, "."), err)
		}
		if ok {
			return k, true, nil
		}
	}
	return keys[0], false, nil
}

// namespaceWithProps returns the stored key of namespace, its properties
// and whether it exists, in one statement per candidate key: a namespace
// exists when it has a property row or a table.
func (c *postgresCatalog) namespaceWithProps(ctx context.Context, q querier, namespace table.Identifier) (string, iceberg.Properties, bool, error) {
	keys := namespaceStorageKeys(namespace)
	for _, k := range keys {
		rows, err := q.Query(ctx, `SELECT property_key, coalesce(property_value, '') FROM iceberg_namespace_properties
			WHERE catalog_name = $1 AND namespace = $2
			UNION ALL SELECT NULL, '' WHERE EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2)`, c.name, k)
		if err != nil {
			return "", nil, false, fmt.Errorf("facade: catalog namespace %s: %w", strings.Join(namespace, "."), err)
		}
		props, found := iceberg.Properties{}, false
		var pk *string
		var pv string
		if _, err := pgx.ForEachRow(rows, []any{&pk, &pv}, func() error {
			found = true
			if pk != nil && *pk != pgcatNamespaceExistsProp {
				props[*pk] = pv
			}
			return nil
		}); err != nil {
			return "", nil, false, fmt.Errorf("facade: catalog namespace %s: %w", strings.Join(namespace, "."), err)
		}
		if found {
			return k, props, true, nil
		}
	}
	return keys[0], nil, false, nil
}

// namespaceKey is the stored key of namespace (resolved only when the
// encoding is ambiguous).
func (c *postgresCatalog) namespaceKey(ctx context.Context, q querier, namespace table.Identifier) (string, error) {
	keys := namespaceStorageKeys(namespace)
	if len(keys) == 1 {
		return keys[0], nil
	}
	k, _, err := c.resolveNamespace(ctx, q, namespace)
	return k, err
}

// ListNamespaces lists the namespaces (under parent, when given).
func (c *postgresCatalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	where, args := "", []any{c.name}
	if len(parent) > 0 {
		_, ok, err := c.resolveNamespace(ctx, c.db, parent)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, strings.Join(parent, "."))
		}
		var conds []string
		for _, k := range namespaceStorageKeys(parent) {
			args = append(args, k)
			conds = append(conds, "ns = $"+strconv.Itoa(len(args)))
		}
		for _, p := range namespaceDescendantPrefixes(parent) {
			args = append(args, namespaceLikePrefix(p))
			conds = append(conds, "ns LIKE $"+strconv.Itoa(len(args))+" ESCAPE '!'")
		}
		where = " WHERE " + strings.Join(conds, " OR ")
	}
	rows, err := c.db.Query(ctx, `SELECT ns FROM (SELECT table_namespace AS ns FROM iceberg_tables WHERE catalog_name = $1
		UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1) n`+where+` ORDER BY ns`, args...)
	if err != nil {
		return nil, fmt.Errorf("facade: catalog list namespaces: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("facade: catalog list namespaces: %w", err)
	}
	out := make([]table.Identifier, 0, len(names))
	for _, n := range names {
		id := namespaceFromString(n)
		if len(parent) == 0 || (len(id) >= len(parent) && slices.Equal(id[:len(parent)], parent)) {
			out = append(out, id)
		}
	}
	return out, nil
}

// CreateNamespace creates a namespace with props.
func (c *postgresCatalog) CreateNamespace(ctx context.Context, namespace table.Identifier, props iceberg.Properties) error {
	if len(namespace) == 0 {
		return fmt.Errorf("%w: empty namespace identifier", catalog.ErrNoSuchNamespace)
	}
	if _, ok := props[pgcatNamespaceExistsProp]; ok {
		return fmt.Errorf("%w: cannot create namespace with reserved namespace property %q", iceberg.ErrInvalidArgument, pgcatNamespaceExistsProp)
	}
	if len(props) == 0 {
		props = iceberg.Properties{pgcatNamespaceExistsProp: "true"}
	}
	return pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		// One namespace is created at a time per catalog: the existence
		// check and the insert must not interleave with another creation.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('lakewrite.iceberg-catalog-ns:' || $1, 0))`, c.name); err != nil {
			return err
		}
		if _, ok, err := c.resolveNamespace(ctx, tx, namespace); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: %s", catalog.ErrNamespaceAlreadyExists, strings.Join(namespace, "."))
		}
		key := namespaceToString(namespace)
		for k, v := range props {
			if _, err := tx.Exec(ctx, `INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
				VALUES ($1, $2, $3, $4)`, c.name, key, k, v); err != nil {
				return fmt.Errorf("facade: catalog create namespace %s: %w", strings.Join(namespace, "."), err)
			}
		}
		return nil
	})
}

// DropNamespace drops an empty namespace.
func (c *postgresCatalog) DropNamespace(ctx context.Context, namespace table.Identifier) error {
	if len(namespace) == 0 {
		return fmt.Errorf("%w: empty namespace identifier", catalog.ErrNoSuchNamespace)
	}
	return pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		key, ok, err := c.resolveNamespace(ctx, tx, namespace)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, key)
		}
		var used bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2)`,
			c.name, key).Scan(&used); err != nil {
			return err
		}
		if used {
			return fmt.Errorf("%w: catalog objects exist in namespace %s", catalog.ErrNamespaceNotEmpty, key)
		}
		_, err = tx.Exec(ctx, `DELETE FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2`, c.name, key)
		return err
	})
}

// CheckNamespaceExists reports whether the namespace exists.
func (c *postgresCatalog) CheckNamespaceExists(ctx context.Context, namespace table.Identifier) (bool, error) {
	_, ok, err := c.resolveNamespace(ctx, c.db, namespace)
	return ok, err
}

// LoadNamespaceProperties returns the namespace's properties.
func (c *postgresCatalog) LoadNamespaceProperties(ctx context.Context, namespace table.Identifier) (iceberg.Properties, error) {
	if len(namespace) == 0 {
		return nil, fmt.Errorf("%w: empty namespace identifier", catalog.ErrNoSuchNamespace)
	}
	key, ok, err := c.resolveNamespace(ctx, c.db, namespace)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, key)
	}
	return c.namespaceProps(ctx, key)
}

// namespaceProps returns the properties of the namespace stored as key.
func (c *postgresCatalog) namespaceProps(ctx context.Context, key string) (iceberg.Properties, error) {
	rows, err := c.db.Query(ctx, `SELECT property_key, coalesce(property_value, '') FROM iceberg_namespace_properties
		WHERE catalog_name = $1 AND namespace = $2`, c.name, key)
	if err != nil {
		return nil, fmt.Errorf("facade: catalog namespace properties: %w", err)
	}
	props := iceberg.Properties{}
	var k, v string
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		if k != pgcatNamespaceExistsProp {
			props[k] = v
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("facade: catalog namespace properties: %w", err)
	}
	return props, nil
}

// UpdateNamespaceProperties removes and sets namespace properties.
func (c *postgresCatalog) UpdateNamespaceProperties(ctx context.Context, namespace table.Identifier, removals []string, updates iceberg.Properties) (catalog.PropertiesUpdateSummary, error) {
	var sum catalog.PropertiesUpdateSummary
	if len(namespace) == 0 {
		return sum, fmt.Errorf("%w: empty namespace identifier", catalog.ErrNoSuchNamespace)
	}
	if _, ok := updates[pgcatNamespaceExistsProp]; ok || slices.Contains(removals, pgcatNamespaceExistsProp) {
		return sum, fmt.Errorf("%w: cannot change reserved namespace property %q", iceberg.ErrInvalidArgument, pgcatNamespaceExistsProp)
	}
	for _, k := range removals {
		if _, ok := updates[k]; ok {
			return sum, fmt.Errorf("conflict between removals and updates for keys: %v", []string{k})
		}
	}
	err := pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		key, ok, err := c.resolveNamespace(ctx, tx, namespace)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, key)
		}
		rows, err := tx.Query(ctx, `SELECT property_key, coalesce(property_value, '') FROM iceberg_namespace_properties
			WHERE catalog_name = $1 AND namespace = $2 FOR UPDATE`, c.name, key)
		if err != nil {
			return err
		}
		cur := iceberg.Properties{}
		var k, v string
		if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { cur[k] = v; return nil }); err != nil {
			return err
		}
		sum = catalog.PropertiesUpdateSummary{Removed: []string{}, Updated: []string{}, Missing: []string{}}
		for _, r := range removals {
			if _, ok := cur[r]; !ok {
				sum.Missing = append(sum.Missing, r)
				continue
			}
			if _, err := tx.Exec(ctx, `DELETE FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2 AND property_key = $3`,
				c.name, key, r); err != nil {
				return err
			}
			sum.Removed = append(sum.Removed, r)
		}
		for _, k := range slices.Sorted(maps.Keys(updates)) {
			v := updates[k]
			if old, ok := cur[k]; ok && old == v {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
				VALUES ($1, $2, $3, $4) ON CONFLICT (catalog_name, namespace, property_key) DO UPDATE SET property_value = EXCLUDED.property_value`,
				c.name, key, k, v); err != nil {
				return err
			}
			sum.Updated = append(sum.Updated, k)
		}
		return nil
	})
	if err != nil {
		return catalog.PropertiesUpdateSummary{}, err
	}
	return sum, nil
}

// Namespace encoding of iceberg-go's SQL catalog: the dot-joined names, or,
// when a name holds a dot (or the joined text the marker), the marker
// followed by the JSON array of names.

func namespaceToString(namespace table.Identifier) string {
	legacy := strings.Join(namespace, ".")
	if !strings.Contains(legacy, pgcatEncodedNSPrefix) && !slices.ContainsFunc(namespace, func(p string) bool { return strings.Contains(p, ".") }) {
		return legacy
	}
	b, _ := json.Marshal(namespace) // strings only: cannot fail
	return pgcatEncodedNSPrefix + string(b)
}

func namespaceFromString(ns string) table.Identifier {
	if !strings.HasPrefix(ns, pgcatEncodedNSPrefix) {
		return strings.Split(ns, ".")
	}
	var id table.Identifier
	if err := json.Unmarshal([]byte(strings.TrimPrefix(ns, pgcatEncodedNSPrefix)), &id); err != nil || len(id) == 0 || namespaceToString(id) != ns {
		return strings.Split(ns, ".")
	}
	return id
}

func namespaceStorageKeys(namespace table.Identifier) []string {
	primary := namespaceToString(namespace)
	legacy := strings.Join(namespace, ".")
	if primary == legacy || slices.ContainsFunc(namespace, func(p string) bool { return strings.Contains(p, ".") }) {
		return []string{primary}
	}
	return []string{primary, legacy}
}

func namespaceDescendantPrefixes(namespace table.Identifier) []string {
	var out []string
	if !slices.ContainsFunc(namespace, func(p string) bool { return strings.Contains(p, ".") }) {
		out = append(out, strings.Join(namespace, ".")+".")
	}
	b, _ := json.Marshal(namespace)
	return append(out, pgcatEncodedNSPrefix+string(b[:len(b)-1])+",")
}

func namespaceLikePrefix(prefix string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(prefix) + "%"
}
