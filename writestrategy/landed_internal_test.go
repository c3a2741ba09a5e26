package writestrategy

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/stretchr/testify/require"

	"github.com/lakewrite/lakewrite/cursor"
	"github.com/lakewrite/lakewrite/facade"
)

func pgField(name string, t arrow.DataType, typname string) arrow.Field {
	f := arrow.Field{Name: name, Type: t, Nullable: true}
	if typname != "" {
		f.Metadata = arrow.NewMetadata([]string{cursor.MetaPGType}, []string{typname})
	}
	return f
}

// The declared schema of a landed table: business columns only, built-in
// types by their recorded name (arrays too), numeric from the decimal,
// anything else as a load stores its Arrow type; nil when a column has no
// such type.
func TestLandedSchema(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		pgField("a", arrow.PrimitiveTypes.Int32, "int4"),
		pgField("b", arrow.ListOf(arrow.PrimitiveTypes.Int32), "_int2"),
		pgField("c", &arrow.Decimal128Type{Precision: 10, Scale: 2}, "numeric"),
		pgField("d", arrow.ListOf(&arrow.Decimal128Type{Precision: 10, Scale: 2}), "_numeric"),
		pgField("e", arrow.BinaryTypes.String, "mood"), // an enum
		pgField("f", extensions.NewUUIDType(), "uuid"),
		pgField("g", arrow.BinaryTypes.String, "json"),
		pgField("h", &arrow.TimestampType{Unit: arrow.Microsecond}, ""),
		pgField(facade.ColRowIndex, arrow.PrimitiveTypes.Int64, ""),
		pgField(facade.ColRowID, arrow.PrimitiveTypes.Int64, ""),
		pgField(facade.ColCreatedAt, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, ""),
	}, nil)
	require.JSONEq(t, `{"columns":[{"name":"a","type":"integer"},{"name":"b","type":"smallint[]"},{"name":"c","type":"numeric(10,2)"},
		{"name":"d","type":"numeric(10,2)[]"},{"name":"e","type":"text"},{"name":"f","type":"uuid"},{"name":"g","type":"json"},
		{"name":"h","type":"timestamp without time zone"}]}`, string(landedSchema(sc)))

	require.Nil(t, landedSchema(nil))
	require.Nil(t, landedSchema(arrow.NewSchema([]arrow.Field{pgField(facade.ColRowIndex, arrow.PrimitiveTypes.Int64, "")}, nil)))
	require.Nil(t, landedSchema(arrow.NewSchema([]arrow.Field{
		pgField("a", arrow.PrimitiveTypes.Int64, "int8"),
		pgField("m", arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String), ""),
	}, nil)))
}
