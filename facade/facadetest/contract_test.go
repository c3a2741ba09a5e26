package facadetest_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakewrite/lakewrite/facade/facadetest"
	"github.com/lakewrite/lakewrite/facade/internal/contract"
)

func TestContract(t *testing.T) {
	contract.Run(t, func(t *testing.T) *contract.Env {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		pols := &contract.Policies{}
		lh := facadetest.New(&facadetest.Config{Allocator: mem, SchemaPolicyFor: pols.For})
		return &contract.Env{
			LH:       lh,
			Mem:      mem,
			Policies: pols,
			FailCommits: func(id string, kind error, n int) {
				if n == 0 {
					lh.InjectFault(id, facadetest.Fault{})
					return
				}
				lh.InjectFault(id, facadetest.Fault{Commit: kind})
			},
			Cleanup: lh.Close,
		}
	})
}
