package manualtable

import (
	"io"
	"net/http"
	"time"
)

// stallReader moves the connection's read deadline forward before every
// read of the body, so a client that stops sending fails the read after
// the stall timeout instead of holding the dataset's intent open.
type stallReader struct {
	body  io.ReadCloser
	rc    *http.ResponseController
	stall time.Duration
}

// stallGuard wraps body; when the response writer cannot set read
// deadlines (a test recorder, a proxy's writer), body is returned as is.
func stallGuard(w http.ResponseWriter, body io.ReadCloser, stall time.Duration) io.ReadCloser {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(stall)); err != nil {
		return body
	}
	return &stallReader{body: body, rc: rc, stall: stall}
}

func (s *stallReader) Read(p []byte) (int, error) {
	if err := s.rc.SetReadDeadline(time.Now().Add(s.stall)); err != nil {
		return 0, err
	}
	return s.body.Read(p)
}

func (s *stallReader) Close() error { return s.body.Close() }
