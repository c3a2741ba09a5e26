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
		commits, fail := facadetest.FailingCommits()
		return &contract.Env{
			LH:          facadetest.Wrap(lh, commits),
			Mem:         mem,
			Policies:    pols,
			FailCommits: fail,
			Cleanup:     lh.Close,
		}
	})
}
