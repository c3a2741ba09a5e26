package restcatalog

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

func (s *Server) authEnabled() bool { return len(s.cfg.Clients) > 0 || len(s.cfg.Tokens) > 0 }

// token is the OAuth2 client-credentials grant of POST /v1/oauth/tokens.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	oauthErr := func(code int, e, desc string) {
		writeJSON(w, code, map[string]string{"error": e, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		oauthErr(http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthErr(http.StatusBadRequest, "unsupported_grant_type", "grant_type "+gt+" is not supported")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	want, known := s.cfg.Clients[id]
	if !known || subtle.ConstantTimeCompare([]byte(want), []byte(secret)) != 1 {
		oauthErr(http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[tok] = id
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":      tok,
		"token_type":        "bearer",
		"expires_in":        3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

// authorize checks the bearer token of a catalog request.
func (s *Server) authorize(r *http.Request) *httpError {
	if !s.authEnabled() {
		return nil
	}
	h := r.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "bearer") || tok == "" {
		return errorf(http.StatusUnauthorized, "NotAuthorizedException", "missing bearer token")
	}
	s.mu.Lock()
	client, ok := s.tokens[tok]
	forbidden := s.forbidden[client]
	s.mu.Unlock()
	switch {
	case !ok:
		return errorf(http.StatusUnauthorized, "NotAuthorizedException", "invalid or expired token")
	case forbidden:
		return errorf(http.StatusForbidden, "ForbiddenException", "client %q may not use this catalog", client)
	}
	return nil
}
