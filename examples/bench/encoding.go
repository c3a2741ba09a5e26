package main

import (
	"context"
	"fmt"
	"io"
	"maps"

	"github.com/apache/iceberg-go"

	"github.com/lakewrite/lakewrite/facade"
)

// phaseE2EBSS is the e2e write again, into a table of its own whose
// __row_index is stored BYTE_STREAM_SPLIT (facade.PropertyRowIndexEncoding),
// the facade's layout before PLAIN became the default: its bytes and client
// CPU beside the e2e phase's show what the compatible default costs.
const (
	phaseE2EBSS  = "e2e-bss"
	datasetIDBSS = datasetID + "_bss"
)

// rowIndexEncodingBefore writes the e2e output's rows once more, into
// datasetIDBSS with the old __row_index encoding, measured as phase e2e-bss.
func (b *bench) rowIndexEncodingBefore(ctx context.Context, rep *report) error {
	fc := *b.fc
	fc.TableProperties = maps.Clone(fc.TableProperties)
	if fc.TableProperties == nil {
		fc.TableProperties = iceberg.Properties{}
	}
	fc.TableProperties[facade.PropertyRowIndexEncoding] = "byte-stream-split"
	fac, err := facade.New(b.env.Catalog, &fc)
	if err != nil {
		return err
	}
	if err := b.prepareDatasetID(ctx, datasetIDBSS); err != nil {
		return err
	}
	b.logf("phase %s", phaseE2EBSS)
	pr, err := b.measure(ctx, phaseE2EBSS, func(ctx context.Context) (int64, int64, error) {
		res, err := b.writeOutput(ctx, fac, datasetIDBSS)
		if err != nil {
			return 0, 0, err
		}
		return res.Rows, res.Bytes, nil
	})
	if err != nil {
		return fmt.Errorf("phase %s: %w", phaseE2EBSS, err)
	}
	ident, err := fac.TableIdentifier(datasetIDBSS)
	if err != nil {
		return err
	}
	if pr.Columns, err = tableColumnBytes(ctx, b.env.Catalog, ident); err != nil {
		return fmt.Errorf("phase %s: column sizes: %w", phaseE2EBSS, err)
	}
	rep.Phases = append(rep.Phases, pr)
	return nil
}

// printEncodings sets the e2e phase (PLAIN __row_index) beside e2e-bss.
func printEncodings(w io.Writer, r *report) {
	now, old := r.phase(phaseE2E), r.phase(phaseE2EBSS)
	if now == nil || old == nil {
		return
	}
	col := func(p *phaseResult) int64 {
		for _, c := range p.Columns {
			if c.Column == facade.ColRowIndex {
				return c.Bytes
			}
		}
		return 0
	}
	fmt.Fprintf(w, "__row_index PLAIN (e2e) vs BYTE_STREAM_SPLIT (e2e-bss): written %s vs %s (__row_index %s vs %s), client CPU %.2fs vs %.2fs\n",
		mib(now.OutBytes), mib(old.OutBytes), kib(col(now)), kib(col(old)), now.ClientCPU, old.ClientCPU)
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }
