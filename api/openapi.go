package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3 description of this API: every route of
// Routes, its request and response bodies (mirroring package protocol),
// its error replies and its security. Tests keep it in step with the route
// table and validate it with kin-openapi (ADR 0016).
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3 document the server serves at
// GET /v1/openapi.json. The caller must not modify the slice.
func OpenAPI() []byte { return openAPIDocument }

// openAPI serves the OpenAPI document. It is open, like /metrics: it
// describes the API and holds no secret, and a client may need it before
// it has a token.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
