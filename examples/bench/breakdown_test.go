package main

import (
	"testing"
)

// TestClassify pins the stage rules: commit-side stages win anywhere on
// the stack, otherwise the frame nearest the leaf decides.
func TestClassify(t *testing.T) {
	names := []string{
		"runtime.memclrNoHeapPointers",                                             // 1
		"github.com/lakewrite/lakewrite/facade/internal/identity.(*Stamper).Stamp", // 2
		"github.com/lakewrite/lakewrite/cursor.(*Stream).All.func1",                // 3
		"github.com/apache/arrow-go/v18/parquet/pqarrow.writeDenseArrow",           // 4
		"github.com/apache/arrow-go/v18/parquet/pqarrow.(*FileWriter).Close",       // 5
		"github.com/apache/iceberg-go/table.WriteRecords",                          // 6
		"github.com/lakewrite/lakewrite/ledger.(*Ledger).Commit",                   // 7
		"github.com/jackc/pgx/v5/pgconn.(*PgConn).ReceiveMessage",                  // 8
		"github.com/apache/iceberg-go/table.(*arrowRecordReader).Next",             // 9
		"runtime.gcBgMarkWorker",                                                   // 10
	}
	p := &profile{locFuncs: map[uint64][]uint64{}, funcNames: map[uint64]string{}}
	for i, n := range names {
		p.locFuncs[uint64(i+1)] = []uint64{uint64(i + 1)}
		p.funcNames[uint64(i+1)] = n
	}
	stageOf := func(locs ...uint64) string {
		i := classify(p, locs)
		if i == len(stages) {
			return "other"
		}
		return stages[i].Name
	}
	for _, c := range []struct {
		locs []uint64
		want string
	}{
		{[]uint64{1, 2, 3}, "stamp/hash"},    // loop body inside the cursor's iterator
		{[]uint64{1, 8, 3}, "decode"},        // the cursor reading
		{[]uint64{1, 4, 6}, "encode"},        // iceberg-go's writer encoding
		{[]uint64{1, 4, 5, 6}, "file close"}, // flush at close
		{[]uint64{8, 7}, "ledger"},           // the ledger's own queries
		{[]uint64{1, 8, 3, 9, 6}, "decode"},  // iceberg-go pulling from the cursor
		{[]uint64{1, 10}, "gc (background)"},
		{[]uint64{1}, "other"},
	} {
		if got := stageOf(c.locs...); got != c.want {
			t.Errorf("stack %v: stage %q, want %q", c.locs, got, c.want)
		}
	}
}

// TestStageProfile checks that the in-process profile is parsed: CPU spent
// in a loop of this test shows up (as "other").
func TestStageProfile(t *testing.T) {
	var sp stageProfile
	if err := sp.start(); err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for i := 0; i < 300_000_000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	got, err := sp.stop()
	if err != nil {
		t.Fatal(err)
	}
	if x == 0 {
		t.Log("unreachable")
	}
	var total float64
	for _, s := range got {
		total += s.Seconds
	}
	if total <= 0 {
		t.Fatalf("no CPU in the profile: %+v", got)
	}
}
