package facade

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/lakewrite/lakewrite/facade/internal/identity"
)

// ErrPartitionOrder: the rows of a write to a partitioned table were not
// clustered by partition (a row belongs to a partition whose rows ended
// earlier in the stream). Nothing was committed and the files written so
// far were deleted. Order the stream by the partition columns (for
// identity, year, month, day, hour and truncate, ordering by the source
// columns is enough) and retry.
var ErrPartitionOrder = errors.New("facade: rows not clustered by partition")

// Partitioning declares the layout of a dataset's table: its partition
// fields and, optionally, its sort order (see Config.PartitionFor). It is
// applied when the facade creates the table; when it changes, the next
// write evolves the table's spec and sort order in its own snapshot (the
// files already written keep their spec). A dataset no longer declared
// keeps its table's layout.
//
// A write to a partitioned table is encoded by one writer (WriteWorkers
// does not apply) and keeps one data file open at a time: the rows must
// arrive clustered by partition (every row of a partition consecutive; see
// Facade.WriteOrder), and the file rolls when the partition changes, so
// memory does not grow with the number of partitions. A row for a partition
// whose rows ended earlier fails the write with ErrPartitionOrder, nothing
// committed. Each data file holds the rows of one partition, its partition
// tuple recorded in the manifest. The identity columns and the checksum do
// not depend on the partitioning.
type Partitioning struct {
	// Fields are the partition fields, in order.
	Fields []PartitionField
	// SortOrder is recorded as the table's sort order (the order the rows
	// are meant to have within a data file). The facade does not sort: it
	// writes rows in stream order and does not check this order.
	SortOrder []SortField
}

// PartitionField derives one partition value from a column.
type PartitionField struct {
	// Column is a top-level column of the table: a business column or
	// __created_at.
	Column string
	// Transform is an Iceberg transform: "identity" (the default when
	// empty), "year", "month", "day", "hour" (dates and timestamps),
	// "bucket[N]" (Murmur3 hash modulo N) or "truncate[W]" (integers and
	// strings).
	Transform string
}

// SortField is one key of a sort order.
type SortField struct {
	// Column is a top-level column of the table.
	Column string
	// Transform as in PartitionField; empty means identity.
	Transform string
	// Descending sorts from high to low.
	Descending bool
	// NullsFirst puts nulls before the other values; by default they come
	// last.
	NullsFirst bool
}

// partitioning returns the declared partitioning of a dataset.
func (f *Facade) partitioning(datasetID string) (Partitioning, bool) {
	if f.s.PartitionFor == nil {
		return Partitioning{}, false
	}
	p, ok := f.s.PartitionFor(datasetID)
	if !ok || (len(p.Fields) == 0 && len(p.SortOrder) == 0) {
		return Partitioning{}, false
	}
	return p, true
}

// parseTransform accepts the transforms Partitioning documents.
func parseTransform(s string) (iceberg.Transform, error) {
	if s == "" {
		return iceberg.IdentityTransform{}, nil
	}
	t, err := iceberg.ParseTransform(s)
	if err != nil {
		return nil, fmt.Errorf("%w: transform %q: %v", ErrInvalidRequest, s, err)
	}
	switch t.(type) {
	case iceberg.IdentityTransform, iceberg.YearTransform, iceberg.MonthTransform, iceberg.DayTransform,
		iceberg.HourTransform, iceberg.BucketTransform, iceberg.TruncateTransform:
		return t, nil
	}
	return nil, fmt.Errorf("%w: transform %q is not supported", ErrInvalidRequest, s)
}

// layout builds the partition spec and sort order of p over the schema of
// a new table.
func layout(sc *iceberg.Schema, p Partitioning) (*iceberg.PartitionSpec, table.SortOrder, error) {
	var opts []iceberg.PartitionOption
	for _, pf := range p.Fields {
		src, ok := sc.FindFieldByName(pf.Column)
		if !ok || !topLevel(sc, src.ID) {
			return nil, table.SortOrder{}, fmt.Errorf("%w: partition column %q is not a top-level column of the table", ErrInvalidRequest, pf.Column)
		}
		t, err := parseTransform(pf.Transform)
		if err != nil {
			return nil, table.SortOrder{}, err
		}
		if !t.CanTransform(src.Type) {
			return nil, table.SortOrder{}, fmt.Errorf("%w: transform %s cannot apply to column %q of type %s", ErrInvalidRequest, t, pf.Column, src.Type)
		}
		name, err := iceberg.GeneratePartitionFieldName(sc, iceberg.PartitionField{SourceIDs: []int{src.ID}, Transform: t})
		if err != nil {
			return nil, table.SortOrder{}, fmt.Errorf("%w: partition field on %q: %v", ErrInvalidRequest, pf.Column, err)
		}
		opts = append(opts, iceberg.AddPartitionFieldByName(pf.Column, name, t, sc, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return nil, table.SortOrder{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	order := table.UnsortedSortOrder
	if len(p.SortOrder) > 0 {
		fields := make([]table.SortField, 0, len(p.SortOrder))
		for _, sf := range p.SortOrder {
			src, ok := sc.FindFieldByName(sf.Column)
			if !ok || !topLevel(sc, src.ID) {
				return nil, table.SortOrder{}, fmt.Errorf("%w: sort column %q is not a top-level column of the table", ErrInvalidRequest, sf.Column)
			}
			t, err := parseTransform(sf.Transform)
			if err != nil {
				return nil, table.SortOrder{}, err
			}
			fld := table.SortField{SourceIDs: []int{src.ID}, Transform: t, Direction: table.SortASC, NullOrder: table.NullsLast}
			if sf.Descending {
				fld.Direction = table.SortDESC
			}
			if sf.NullsFirst {
				fld.NullOrder = table.NullsFirst
			}
			fields = append(fields, fld)
		}
		if order, err = table.NewSortOrder(table.InitialSortOrderID, fields); err != nil {
			return nil, table.SortOrder{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	return &spec, order, nil
}

func topLevel(sc *iceberg.Schema, id int) bool {
	for _, f := range sc.Fields() {
		if f.ID == id {
			return true
		}
	}
	return false
}

// partKey is one partition value of one row: null, an integer (or the
// bits of a float), or a string (bytes). s may point into a batch.
type partKey struct {
	kind byte // 0 null, 1 integer, 2 string
	n    int64
	s    string
}

// clusterCheck enforces that the rows of a write arrive clustered by
// partition. It keeps the encoded tuple of the current partition and the
// set of partitions already ended (a few bytes each; no Arrow memory).
type clusterCheck struct {
	dataset string
	spec    *iceberg.PartitionSpec
	schema  *iceberg.Schema
	names   []string // source column per partition field
	keyers  []func(arr arrow.Array, i int) partKey
	arrSc   *arrow.Schema
	cols    []int
	prev    []partKey
	row     []partKey
	current string
	started bool
	ended   map[string]struct{}
}

func newClusterCheck(dataset string, tbl *table.Table) (*clusterCheck, error) {
	spec := tbl.Spec()
	if spec.IsUnpartitioned() {
		return nil, nil
	}
	sc := tbl.Schema()
	c := &clusterCheck{dataset: dataset, spec: &spec, schema: sc, ended: map[string]struct{}{}}
	for _, pf := range spec.Fields() {
		name, ok := sc.FindColumnName(pf.SourceID())
		if !ok {
			return nil, fmt.Errorf("facade: partition field %s: source column %d not in the table schema", pf.Name, pf.SourceID())
		}
		src, _ := sc.FindFieldByID(pf.SourceID())
		k, err := keyer(pf.Transform, src.Type)
		if err != nil {
			return nil, fmt.Errorf("%w: partition field %s on %q: %v", ErrInvalidRequest, pf.Name, name, err)
		}
		c.names = append(c.names, name)
		c.keyers = append(c.keyers, k)
	}
	c.prev = make([]partKey, len(c.keyers))
	c.row = make([]partKey, len(c.keyers))
	return c, nil
}

// check verifies that rec continues the clustering of the rows before it.
func (c *clusterCheck) check(rec arrow.RecordBatch) error {
	if rec.Schema() != c.arrSc {
		c.arrSc, c.cols = rec.Schema(), c.cols[:0]
		for _, n := range c.names {
			idx := rec.Schema().FieldIndices(n)
			if len(idx) != 1 {
				return fmt.Errorf("facade: partition source column %q missing from the written rows", n)
			}
			c.cols = append(c.cols, idx[0])
		}
	}
	n := int(rec.NumRows())
	for i := range n {
		for j, k := range c.keyers {
			c.row[j] = k(rec.Column(c.cols[j]), i)
		}
		if i > 0 && equalKeys(c.row, c.prev) {
			c.prev, c.row = c.row, c.prev
			continue
		}
		enc := encodeKeys(c.row)
		if !c.started || enc != c.current {
			if c.started {
				c.ended[c.current] = struct{}{}
			}
			if _, seen := c.ended[enc]; seen {
				return fmt.Errorf("%w: dataset %q: a row of partition %s follows rows of other partitions after its own ended",
					ErrPartitionOrder, c.dataset, c.describe(c.row))
			}
			c.current, c.started = enc, true
		}
		c.prev, c.row = c.row, c.prev
	}
	return nil
}

func (c *clusterCheck) describe(keys []partKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		name := c.spec.Field(i).Name
		switch k.kind {
		case 0:
			parts[i] = name + "=null"
		case 1:
			parts[i] = fmt.Sprintf("%s=%d", name, k.n)
		default:
			parts[i] = fmt.Sprintf("%s=%q", name, k.s)
		}
	}
	return strings.Join(parts, "/")
}

func equalKeys(a, b []partKey) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func encodeKeys(keys []partKey) string {
	var b []byte
	for _, k := range keys {
		b = append(b, k.kind)
		switch k.kind {
		case 1:
			b = binary.BigEndian.AppendUint64(b, uint64(k.n))
		case 2:
			b = binary.BigEndian.AppendUint32(b, uint32(len(k.s)))
			b = append(b, k.s...)
		}
	}
	return string(b)
}

const (
	microsPerHour = int64(3600_000_000)
	microsPerDay  = 24 * microsPerHour
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// keyer returns the function computing one partition value per row of an
// Arrow column holding the source column (as the facade writes it).
func keyer(t iceberg.Transform, src iceberg.Type) (func(arrow.Array, int) partKey, error) {
	switch t := t.(type) {
	case iceberg.IdentityTransform:
		return identityKey, nil
	case iceberg.YearTransform, iceberg.MonthTransform, iceberg.DayTransform, iceberg.HourTransform:
		return timeKey(t), nil
	case iceberg.BucketTransform:
		switch src.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.DateType, iceberg.TimeType, iceberg.TimestampType,
			iceberg.TimestampTzType, iceberg.TimestampNsType, iceberg.TimestampTzNsType, iceberg.StringType, iceberg.BinaryType:
		default:
			return nil, fmt.Errorf("bucket of a %s column is not supported", src)
		}
		h := t.Transformer(src)
		return func(a arrow.Array, i int) partKey {
			if a.IsNull(i) {
				return partKey{}
			}
			v, err := bucketValue(a, i)
			if err != nil {
				return partKey{kind: 2, s: a.ValueStr(i)}
			}
			r := h(v)
			if !r.Valid {
				return partKey{}
			}
			return partKey{kind: 1, n: int64(r.Val)}
		}, nil
	case iceberg.TruncateTransform:
		switch src.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.StringType, iceberg.BinaryType:
		default:
			return nil, fmt.Errorf("truncate of a %s column is not supported", src)
		}
		tr, err := t.Transformer(src)
		if err != nil {
			return nil, err
		}
		w := int64(t.Width)
		return func(a arrow.Array, i int) partKey {
			if a.IsNull(i) {
				return partKey{}
			}
			switch a := a.(type) {
			case *array.Int32:
				v := int64(a.Value(i))
				return partKey{kind: 1, n: v - (((v % w) + w) % w)}
			case *array.Int64:
				v := a.Value(i)
				return partKey{kind: 1, n: v - (((v % w) + w) % w)}
			case *array.String:
				return partKey{kind: 2, s: tr(a.Value(i)).(string)}
			case *array.LargeString:
				return partKey{kind: 2, s: tr(a.Value(i)).(string)}
			case *array.Binary:
				b := a.Value(i)
				return partKey{kind: 2, s: string(b[:min(len(b), int(w))])}
			}
			return partKey{kind: 2, s: a.ValueStr(i)}
		}, nil
	}
	return nil, fmt.Errorf("transform %s is not supported", t)
}

func identityKey(a arrow.Array, i int) partKey {
	if a.IsNull(i) {
		return partKey{}
	}
	switch a := a.(type) {
	case *array.Int8:
		return partKey{kind: 1, n: int64(a.Value(i))}
	case *array.Int16:
		return partKey{kind: 1, n: int64(a.Value(i))}
	case *array.Int32:
		return partKey{kind: 1, n: int64(a.Value(i))}
	case *array.Int64:
		return partKey{kind: 1, n: a.Value(i)}
	case *array.Date32:
		return partKey{kind: 1, n: int64(a.Value(i))}
	case *array.Timestamp:
		return partKey{kind: 1, n: int64(a.Value(i))}
	case *array.Time64:
		return partKey{kind: 1, n: int64(a.Value(i))}
	case *array.Boolean:
		if a.Value(i) {
			return partKey{kind: 1, n: 1}
		}
		return partKey{kind: 1}
	case *array.Float32:
		return partKey{kind: 1, n: int64(math.Float64bits(float64(a.Value(i))))}
	case *array.Float64:
		return partKey{kind: 1, n: int64(math.Float64bits(a.Value(i)))}
	case *array.String:
		return partKey{kind: 2, s: a.Value(i)}
	case *array.LargeString:
		return partKey{kind: 2, s: a.Value(i)}
	case *array.Binary:
		return partKey{kind: 2, s: string(a.Value(i))}
	}
	return partKey{kind: 2, s: a.ValueStr(i)}
}

// timeKey computes year, month, day or hour values as Iceberg does
// (years, months, days or hours since the Unix epoch).
func timeKey(t iceberg.Transform) func(arrow.Array, int) partKey {
	return func(a arrow.Array, i int) partKey {
		if a.IsNull(i) {
			return partKey{}
		}
		var micros int64
		switch a := a.(type) {
		case *array.Date32:
			micros = int64(a.Value(i)) * microsPerDay
		case *array.Timestamp:
			unit := a.DataType().(*arrow.TimestampType).Unit
			v := int64(a.Value(i))
			switch unit {
			case arrow.Second:
				micros = v * 1_000_000
			case arrow.Millisecond:
				micros = v * 1_000
			case arrow.Microsecond:
				micros = v
			case arrow.Nanosecond:
				micros = floorDiv(v, 1_000)
			}
		default:
			return partKey{kind: 2, s: a.ValueStr(i)}
		}
		switch t.(type) {
		case iceberg.HourTransform:
			return partKey{kind: 1, n: floorDiv(micros, microsPerHour)}
		case iceberg.DayTransform:
			return partKey{kind: 1, n: floorDiv(micros, microsPerDay)}
		}
		tm := arrow.Timestamp(micros).ToTime(arrow.Microsecond)
		years := int64(tm.Year() - 1970)
		if _, ok := t.(iceberg.YearTransform); ok {
			return partKey{kind: 1, n: years}
		}
		return partKey{kind: 1, n: years*12 + int64(tm.Month()) - 1}
	}
}

// bucketValue converts one Arrow value to the Go value iceberg-go's
// bucket transform hashes.
func bucketValue(a arrow.Array, i int) (any, error) {
	switch a := a.(type) {
	case *array.Int32:
		return a.Value(i), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Date32:
		return iceberg.Date(a.Value(i)), nil
	case *array.Time64:
		return iceberg.Time(a.Value(i)), nil
	case *array.Timestamp:
		if a.DataType().(*arrow.TimestampType).Unit == arrow.Nanosecond {
			return iceberg.TimestampNano(a.Value(i)), nil
		}
		return iceberg.Timestamp(a.Value(i)), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.Binary:
		return a.Value(i), nil
	}
	return nil, fmt.Errorf("bucket of %s", a.DataType())
}

// OrderKey is one key of the order a write's rows should arrive in.
type OrderKey struct {
	Column     string
	Descending bool
	NullsFirst bool
	// Bucket > 0 orders by the Iceberg bucket of Column into Bucket
	// buckets (a bucket[Bucket] partition field), not by Column itself.
	Bucket int
	// Unit ("year", "month", "day" or "hour") orders by Column truncated
	// to that unit, in UTC (a time partition field), not by Column itself,
	// so that the keys after it order the rows within each partition.
	Unit string
	// Width > 0 orders by Column truncated as a truncate[Width] partition
	// field truncates it (strings to their first Width characters,
	// integers down to a multiple of Width), for the same reason; a
	// column of another type is ordered by itself.
	Width int
	// Partition: the key clusters a partition field (its value is the
	// partition's), not a sort key.
	Partition bool
}

// WriteOrder returns the order in which a write's rows must arrive to be
// clustered by partition, then sorted by the sort order: each partition
// field's value, ascending (an identity field's column; a year, month,
// day or hour field's column truncated to that unit, OrderKey.Unit; a
// truncate[W] field's column truncated, OrderKey.Width = W; a bucket[N]
// field's bucket, OrderKey.Bucket = N), followed by the sort order's
// keys. The layout is the dataset's declaration
// (Config.PartitionFor), which the next write applies, else the table's
// current one. It is empty for an unpartitioned, unsorted dataset.
// Identity columns are left out (the facade stamps them; __created_at is
// one value per write), and so are sort keys with a bucket transform.
func (f *Facade) WriteOrder(ctx context.Context, datasetID string) ([]OrderKey, error) {
	if _, err := f.s.Naming(datasetID); err != nil {
		return nil, err
	}
	var keys []OrderKey
	if p, ok := f.partitioning(datasetID); ok {
		for _, pf := range p.Fields {
			t, err := parseTransform(pf.Transform)
			if err != nil {
				return nil, err
			}
			if !identity.IsIdentity(pf.Column) {
				keys = append(keys, partitionOrderKey(pf.Column, t))
			}
		}
		for _, sf := range p.SortOrder {
			t, err := parseTransform(sf.Transform)
			if err != nil {
				return nil, err
			}
			if _, ok := t.(iceberg.BucketTransform); !ok && !identity.IsIdentity(sf.Column) {
				keys = append(keys, OrderKey{Column: sf.Column, Descending: sf.Descending, NullsFirst: sf.NullsFirst})
			}
		}
		return keys, nil
	}
	tbl, err := f.loadWithin(ctx, datasetID)
	switch {
	case errors.Is(err, ErrTableNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	spec, order, sc := tbl.Spec(), tbl.SortOrder(), tbl.Schema()
	for _, pf := range spec.Fields() {
		name, ok := sc.FindColumnName(pf.SourceID())
		if !ok {
			return nil, fmt.Errorf("facade: dataset %q: partition field %s: source column %d not in the table schema", datasetID, pf.Name, pf.SourceID())
		}
		if !identity.IsIdentity(name) {
			keys = append(keys, partitionOrderKey(name, pf.Transform))
		}
	}
	for _, sf := range order.Fields() {
		name, ok := sc.FindColumnName(sf.SourceID())
		if _, bucket := sf.Transform.(iceberg.BucketTransform); !ok || bucket || identity.IsIdentity(name) {
			continue
		}
		keys = append(keys, OrderKey{Column: name, Descending: sf.Direction == table.SortDESC, NullsFirst: sf.NullOrder == table.NullsFirst})
	}
	return keys, nil
}

// partitionOrderKey is the order key clustering a partition field: its
// value ascending.
func partitionOrderKey(column string, t iceberg.Transform) OrderKey {
	k := OrderKey{Column: column, Partition: true}
	switch t := t.(type) {
	case iceberg.BucketTransform:
		k.Bucket = t.NumBuckets
	case iceberg.YearTransform:
		k.Unit = "year"
	case iceberg.MonthTransform:
		k.Unit = "month"
	case iceberg.DayTransform:
		k.Unit = "day"
	case iceberg.HourTransform:
		k.Unit = "hour"
	case iceberg.TruncateTransform:
		k.Width = t.Width
	}
	return k
}

// evolveLayout stages in txn the dataset's declared partition spec and
// sort order where they differ from the table's: partition fields the
// declaration no longer has are removed, new ones added (a new spec id;
// the files already written keep theirs). An undeclared dataset keeps its
// table's layout.
func (f *Facade) evolveLayout(txn *table.Transaction, datasetID string) error {
	p, ok := f.partitioning(datasetID)
	if !ok {
		return nil
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return fmt.Errorf("facade: stage layout: %w", err)
	}
	sc := staged.Schema()
	want, order, err := layout(sc, p)
	if err != nil {
		return fmt.Errorf("facade: dataset %q: %w", datasetID, err)
	}
	cur := staged.Spec()
	key := func(pf iceberg.PartitionField) string { return fmt.Sprintf("%d/%s", pf.SourceID(), pf.Transform) }
	wanted, have := map[string]bool{}, map[string]bool{}
	for _, pf := range want.Fields() {
		wanted[key(pf)] = true
	}
	for _, pf := range cur.Fields() {
		have[key(pf)] = true
	}
	same := len(wanted) == len(have)
	for k := range wanted {
		same = same && have[k]
	}
	if !same {
		us := txn.UpdateSpec(true)
		for _, pf := range cur.Fields() {
			if !wanted[key(pf)] {
				us.RemoveField(pf.Name)
			}
		}
		for _, pf := range want.Fields() {
			if !have[key(pf)] {
				col, _ := sc.FindColumnName(pf.SourceID())
				us.AddField(col, pf.Transform, pf.Name)
			}
		}
		if err := us.Commit(); err != nil {
			return fmt.Errorf("%w: dataset %q: evolve the partition spec: %v", ErrInvalidRequest, datasetID, err)
		}
	}
	if err := txn.ReplaceSortOrder(order); err != nil {
		return fmt.Errorf("facade: dataset %q: replace the sort order: %w", datasetID, err)
	}
	return nil
}

// sameSpec checks that the staged files were written under the spec the
// snapshot commits with (a concurrent writer may have changed it).
func sameSpec(txn *table.Transaction, files []iceberg.DataFile) error {
	if len(files) == 0 {
		return nil
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return fmt.Errorf("facade: stage layout: %w", err)
	}
	spec := staged.Spec()
	if id := spec.ID(); int(files[0].SpecID()) != id {
		return fmt.Errorf("%w: the table's partition spec changed to %d while the write used %d", ErrCommitConflict, id, files[0].SpecID())
	}
	return nil
}

// partitionGroups splits the compaction candidates of a partitioned table
// by partition spec and partition, each group size-tiered as an
// unpartitioned table's files are; groups of fewer than two files are
// dropped. Files written under an older spec are compacted within their own
// spec and partition (rewriteFiles writes them under that spec), so a
// spec change never makes a compaction fan out over the new partitions:
// one file is open at a time whatever the spec. Files of a spec that
// writable(specID) refuses are left alone. Each group keeps __row_index
// order.
func partitionGroups(writable func(specID int) bool, files []compactFile) [][]compactFile {
	idx := map[string]int{}
	var groups [][]compactFile
	for _, cf := range files {
		specID := int(cf.task.File.SpecID())
		if !writable(specID) {
			continue
		}
		k := fmt.Sprint(specID, cf.task.File.Partition())
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], cf)
	}
	out := groups[:0]
	for _, g := range groups {
		if g = sizeTiered(g); len(g) >= 2 || slices.ContainsFunc(g, hasDeletes) {
			out = append(out, g)
		}
	}
	return out
}

// specWritable reports whether files can be written under the table's
// partition spec specID: it exists and every source column of its fields
// is still in the current schema.
func specWritable(tbl *table.Table) func(specID int) bool {
	return func(specID int) bool {
		spec := tbl.Metadata().PartitionSpecByID(specID)
		if spec == nil {
			return false
		}
		for _, pf := range spec.Fields() {
			if _, ok := tbl.Schema().FindFieldByID(pf.SourceID()); !ok {
				return false
			}
		}
		return true
	}
}

// withSpec returns tbl as a table whose default partition spec is specID,
// for writing files under an older spec (nothing is committed with it).
func withSpec(tbl *table.Table, specID int) (*table.Table, error) {
	if spec := tbl.Spec(); spec.ID() == specID {
		return tbl, nil
	}
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return nil, err
	}
	if err := b.SetDefaultSpecID(specID); err != nil {
		return nil, err
	}
	meta, err := b.Build()
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil), nil
}
