package writestrategy

import (
	"fmt"

	"github.com/lakewrite/lakewrite/incremental"
)

// checkDepends validates a declaration against the sources' columns
// (before anything is read or written); the output's columns are checked
// once its statement is described (checkDependsOutput).
func checkDepends(d *incremental.Dependency, sources map[string]*relation) error {
	if d == nil {
		return nil
	}
	cols := make(map[string][]string, len(sources))
	for id, r := range sources {
		cols[id] = r.schema.names()
	}
	if err := d.Validate(nil, cols); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// checkDependsOutput validates a projection's declaration against the
// output's described columns.
func checkDependsOutput(p projection, cols Schema) error {
	if p.depends == nil {
		return nil
	}
	if err := p.depends.Validate(cols.names(), nil); err != nil {
		return fmt.Errorf("%w: output %q: %w", ErrInvalid, p.output, err)
	}
	return nil
}
