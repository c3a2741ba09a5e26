package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// The per-stage CPU breakdown of a phase comes from an in-process CPU
// profile of that phase (100 samples per CPU-second): each sample's stack is
// given to the first stage below that has a frame on it, so a stage is the
// CPU spent in it and in everything it calls (allocation, zeroing and GC
// assists included). Background GC work has its own stage.

// stage is one row of the breakdown.
type stage struct {
	Name  string   `json:"stage"`
	match []string // function-name substrings, any frame of the stack
}

// stages: the first four take a stack when any frame on it matches (in
// this order); otherwise the frame nearest the leaf that matches one of the
// rest decides, so the write's loop body running inside the cursor's
// iterator is stamping, and the cursor called by iceberg-go's reader is
// decoding.
var stages = []stage{
	{Name: "ledger", match: []string{"/lakewrite/ledger."}},
	{Name: "catalog commit", match: []string{
		"table.(*Transaction).Commit", "/catalog/sql.", "CommitTable", "facade.(*postgresCatalog)",
		"facade.(*icebergStaged).Commit", "facade.(*icebergTxStaged).Commit",
	}},
	{Name: "manifests", match: []string{
		"iceberg-go.(*ManifestWriter)", "iceberg-go.(*ManifestListWriter)", "iceberg-go.WriteManifest",
		"iceberg-go.NewManifestWriter", "table.(*snapshotProducer)", "table.(*fastAppendFiles)",
		"table.(*overwriteFiles)", "hamba/avro",
	}},
	{Name: "file close", match: []string{
		"pqarrow.(*FileWriter).Close", "file.(*Writer).Close", "file.(*Writer).FlushWithFooter",
		"DataFileStatsFromMeta", "dataFileStatistics",
	}},
	{Name: "stamp/hash", match: []string{"facade/internal/identity."}},
	{Name: "encode", match: []string{"arrow-go/v18/parquet", "klauspost/compress", "iceberg-go/table."}},
	{Name: "decode", match: []string{"/lakewrite/cursor.", "jackc/pgx"}},
	{Name: "gc (background)", match: []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
}

// firstLeafStage is the index of the first stage decided by the frame
// nearest the leaf.
const firstLeafStage = 4

// stageCPU is the CPU time of one stage in a phase.
type stageCPU struct {
	Stage   string  `json:"stage"`
	Seconds float64 `json:"cpu_seconds"`
}

// stageProfile profiles the CPU of the process between start and stop.
type stageProfile struct {
	buf bytes.Buffer
	on  bool
}

func (p *stageProfile) start() error {
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return err
	}
	p.on = true
	return nil
}

// stop ends the profile and returns the CPU seconds per stage (stages
// without samples are left out; "other" last).
func (p *stageProfile) stop() ([]stageCPU, error) {
	if !p.on {
		return nil, nil
	}
	pprof.StopCPUProfile()
	p.on = false
	prof, err := parseProfile(&p.buf)
	if err != nil {
		return nil, err
	}
	secs := make([]float64, len(stages)+1)
	for _, s := range prof.samples {
		i := classify(prof, s.locs)
		secs[i] += float64(s.cpuNanos) / 1e9
	}
	var out []stageCPU
	for i, v := range secs {
		if v == 0 {
			continue
		}
		name := "other"
		if i < len(stages) {
			name = stages[i].Name
		}
		out = append(out, stageCPU{Stage: name, Seconds: v})
	}
	return out, nil
}

func classify(p *profile, locs []uint64) int {
	matches := func(name string, i int) bool {
		for _, m := range stages[i].match {
			if strings.Contains(name, m) {
				return true
			}
		}
		return false
	}
	best := len(stages)
	for _, l := range locs {
		for _, fn := range p.locFuncs[l] {
			for i := 0; i < firstLeafStage && i < best; i++ {
				if matches(p.funcNames[fn], i) {
					best = i
				}
			}
		}
	}
	if best < len(stages) {
		return best
	}
	for _, l := range locs { // leaf first
		for _, fn := range p.locFuncs[l] {
			for i := firstLeafStage; i < len(stages); i++ {
				if matches(p.funcNames[fn], i) {
					return i
				}
			}
		}
	}
	return len(stages)
}

// profile is the part of a pprof profile the breakdown needs.
type profile struct {
	samples   []sample
	locFuncs  map[uint64][]uint64 // location id -> function ids (inlined first)
	funcNames map[uint64]string
}

type sample struct {
	locs     []uint64
	cpuNanos int64
}

// parseProfile decodes a gzipped profile.proto as runtime/pprof writes it
// (sample values: samples/count, cpu/nanoseconds).
func parseProfile(r io.Reader) (*profile, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	p := &profile{locFuncs: map[uint64][]uint64{}, funcNames: map[uint64]string{}}
	var strs []string
	funcNameIdx := map[uint64]int64{}
	err = protoFields(raw, func(field int, v uint64, b []byte) error {
		switch field {
		case 2: // sample
			var s sample
			var vals []int64
			if err := protoFields(b, func(f int, v uint64, b []byte) error {
				switch f {
				case 1:
					s.locs = appendPacked(s.locs, v, b)
				case 2:
					for _, u := range appendPacked(nil, v, b) {
						vals = append(vals, int64(u))
					}
				}
				return nil
			}); err != nil {
				return err
			}
			if len(vals) >= 2 {
				s.cpuNanos = vals[1]
			}
			p.samples = append(p.samples, s)
		case 4: // location
			var id uint64
			var fns []uint64
			if err := protoFields(b, func(f int, v uint64, b []byte) error {
				switch f {
				case 1:
					id = v
				case 4: // line
					return protoFields(b, func(f int, v uint64, _ []byte) error {
						if f == 1 {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			}); err != nil {
				return err
			}
			p.locFuncs[id] = fns
		case 5: // function
			var id uint64
			var name int64
			if err := protoFields(b, func(f int, v uint64, _ []byte) error {
				switch f {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			}); err != nil {
				return err
			}
			funcNameIdx[id] = name
		case 6: // string table
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id, idx := range funcNameIdx {
		if idx >= 0 && idx < int64(len(strs)) {
			p.funcNames[id] = strs[idx]
		}
	}
	return p, nil
}

// appendPacked appends a repeated varint field, packed (b) or not (v).
func appendPacked(dst []uint64, v uint64, b []byte) []uint64 {
	if b == nil {
		return append(dst, v)
	}
	for len(b) > 0 {
		u, n := uvarint(b)
		if n <= 0 {
			break
		}
		dst = append(dst, u)
		b = b[n:]
	}
	return dst
}

var errProto = errors.New("malformed profile")

// protoFields calls fn for each field of a protobuf message: varints with
// v, length-delimited fields with b (non-nil).
func protoFields(buf []byte, fn func(field int, v uint64, b []byte) error) error {
	for len(buf) > 0 {
		key, n := uvarint(buf)
		if n <= 0 {
			return errProto
		}
		buf = buf[n:]
		field, wire := int(key>>3), key&7
		switch wire {
		case 0:
			v, n := uvarint(buf)
			if n <= 0 {
				return errProto
			}
			buf = buf[n:]
			if err := fn(field, v, nil); err != nil {
				return err
			}
		case 2:
			l, n := uvarint(buf)
			if n <= 0 || uint64(len(buf)-n) < l {
				return errProto
			}
			b := buf[n : n+int(l)]
			if b == nil {
				b = []byte{}
			}
			buf = buf[n+int(l):]
			if err := fn(field, 0, b); err != nil {
				return err
			}
		case 1:
			if len(buf) < 8 {
				return errProto
			}
			buf = buf[8:]
		case 5:
			if len(buf) < 4 {
				return errProto
			}
			buf = buf[4:]
		default:
			return fmt.Errorf("%w: wire type %d", errProto, wire)
		}
	}
	return nil
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// columnBytes is the compressed size of one column in a phase's output
// (the Iceberg column_sizes of its data files: chunks, pages and headers).
type columnBytes struct {
	Column string `json:"column"`
	Bytes  int64  `json:"bytes"`
}

// tableColumnBytes sums the column sizes of the current snapshot's data
// files of ident, in schema order.
func tableColumnBytes(ctx context.Context, cat catalog.Catalog, ident table.Identifier) ([]columnBytes, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return nil, err
	}
	sizes := map[int]int64{}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, err
			}
			for id, n := range e.DataFile().ColumnSizes() {
				sizes[id] += n
			}
		}
	}
	var out []columnBytes
	for _, f := range tbl.Schema().Fields() {
		if n, ok := sizes[f.ID]; ok {
			out = append(out, columnBytes{Column: f.Name, Bytes: n})
		}
	}
	return out, nil
}
