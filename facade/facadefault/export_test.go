package facadefault

import "github.com/lakewrite/lakewrite/facade"

// Hits returns how many times a fault of the wrapper lh (from Wrap) fired
// at p so far.
func Hits(lh facade.Lakehouse, p Point) int { return lh.(*lakehouse).hitsAt(p) }
