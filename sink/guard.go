package sink

import (
	"fmt"
	"strings"
)

// UnknownWriterError refuses a write by a writer that has no flags row to a
// dataset whose contents that writer's safe default (Postgres) would move
// or take over: one that lives on Iceberg, or whose last write came from a
// writer registered under another id (often a typo: "pipeline.ouput" for
// "pipeline.output"). It matches [ErrUnknownWriter]. Nothing was written.
type UnknownWriterError struct {
	WriterID  string
	DatasetID string
	// LivesOn is where the dataset's contents live (the sink of its last
	// committed write).
	LivesOn Sink
	// LastWriter is the writer of the dataset's last committed write; ""
	// when unknown.
	LastWriter string
	// Known lists the writers that have a flags row, by id.
	Known []string
}

func (e *UnknownWriterError) Error() string {
	var why string
	switch {
	case e.LastWriter != "" && e.LastWriter != e.WriterID:
		why = fmt.Sprintf("its last write (on %s) came from registered writer %q", e.LivesOn, e.LastWriter)
	default:
		why = fmt.Sprintf("it lives on %s", e.LivesOn)
	}
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("sink: writer %q has no flags row and would write dataset %q to the safe default %s, but %s; nothing was written (known writers: %s; fix the writer id or register it with SetWriter)",
		e.WriterID, e.DatasetID, Postgres, why, known)
}

// Is makes errors.Is(err, ErrUnknownWriter) true.
func (e *UnknownWriterError) Is(target error) bool { return target == ErrUnknownWriter }
