package api

import (
	"context"
	"net/http"

	"github.com/slicelet/slicelet/internal/buildinfo"
)

// registerKubectl adds the routes that serve slicectl's kubectl behaviours.
func (s *Server) registerKubectl(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/version", s.version)
}

// version answers GET /v1/version with the daemon's buildinfo.Info.
func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, buildinfo.Get())
}

// Version returns the daemon's build (GET /v1/version).
func (c *Client) Version(ctx context.Context) (buildinfo.Info, error) {
	var i buildinfo.Info
	err := c.getJSON(ctx, http.MethodGet, "/v1/version", nil, &i)
	return i, err
}
