package api

import (
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
)

// version serves GET /v1/version: the build the server runs, open like
// the health endpoints, so `vigil version` can show it without a token.
func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	v := s.cfg.Version
	if v == "" {
		v = "dev"
	}
	writeJSON(w, http.StatusOK, protocol.VersionInfo{Version: v})
}
