package facade

import (
	"encoding/json"
	"fmt"

	"github.com/apache/iceberg-go"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// ErrSchemaChange: a write would change the table schema in a way the
// dataset's SchemaPolicy refuses. Nothing was written.
var ErrSchemaChange = identity.ErrSchemaChange

// SchemaPolicy restricts how a write may change a table's schema. The zero
// value allows every change a write can make: a replace may add, drop,
// promote, retype and reorder columns (it rewrites every row); an append
// may add nullable columns (existing rows read NULL) and promote types.
// An append never drops a column (a column it leaves out reads NULL,
// unless it is required) and never retypes one incompatibly: those are a
// *SchemaMismatchError whatever the policy.
type SchemaPolicy struct {
	// RefuseDrops refuses a replace that leaves out a column of the table.
	RefuseDrops bool
	// RefuseIncompatible refuses a replace that changes a column's type in a
	// way Iceberg cannot promote (anything but int to long, float to
	// double, and decimal precision widening with the same scale). Such a
	// column otherwise gets a new field id.
	RefuseIncompatible bool
	// RefuseAppendAdds refuses an append that brings a column the table
	// does not have, with a *SchemaMismatchError naming it (by default the
	// column is added as an optional column).
	RefuseAppendAdds bool
}

// SchemaChangeError reports the columns a replace would drop or retype
// against the dataset's SchemaPolicy. It matches ErrSchemaChange. Fields:
// Dataset, Dropped (columns the write leaves out, RefuseDrops), Retyped
// (columns with an incompatible new type, RefuseIncompatible), Detail.
type SchemaChangeError = identity.SchemaChangeError

// nameMappingJSON is the schema.name-mapping.default value of s.
func nameMappingJSON(s *iceberg.Schema) (string, error) {
	b, err := json.Marshal(s.NameMapping())
	if err != nil {
		return "", fmt.Errorf("facade: name mapping: %w", err)
	}
	return string(b), nil
}
