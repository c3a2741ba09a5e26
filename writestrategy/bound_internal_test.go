package writestrategy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lakewrite/lakewrite/facade"
	"github.com/lakewrite/lakewrite/ledger"
)

// A Stage that got no answer from the catalog within its bound fails the
// write with an error matching ledger.ErrNoConnection and keeping the
// facade's error; other errors pass unchanged.
func TestCatalogNoConnection(t *testing.T) {
	err := catalogNoConnection(fmt.Errorf("facade: load: %w", facade.ErrCatalogTimeout))
	if !errors.Is(err, ledger.ErrNoConnection) || !errors.Is(err, facade.ErrCatalogTimeout) {
		t.Fatalf("got %v", err)
	}
	other := errors.New("other")
	if got := catalogNoConnection(other); got != other {
		t.Fatalf("got %v", got)
	}
}
