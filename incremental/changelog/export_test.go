package changelog

// SetCaptureChunk sets the most images the triggers that l installs from
// then on record in one log entry.
func SetCaptureChunk(l *Log, n int) { l.chunk = n }
