package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Object kinds of the API's object routes, by their path segment.
const (
	KindConfigMaps = "configmaps"
	KindSecrets    = "secrets"
)

// kindOf is the manifest kind of a path segment.
var kindOf = map[string]string{KindConfigMaps: "ConfigMap", KindSecrets: "Secret"}

// ObjectSummary is a ConfigMap or Secret as the API lists it: never a Secret's values.
type ObjectSummary struct {
	// Kind is "ConfigMap" or "Secret".
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Source is "file" (the manifest directory) or "api".
	Source string `json:"source,omitempty"`
	// Keys counts its data entries.
	Keys int `json:"keys"`
	// Action is what an apply did (created, configured, unchanged); DryRun is set for a dry run.
	Action string `json:"action,omitempty"`
	DryRun bool   `json:"dryRun,omitempty"`
}

// ObjectList is the answer of GET /v1/configmaps and /v1/secrets.
type ObjectList struct {
	Items []ObjectSummary `json:"items"`
}

// ObjectBackend is what a Backend implements to serve ConfigMaps and Secrets:
// GET/POST /v1/configmaps and /v1/secrets, DELETE /v1/{configmaps,secrets}/{namespace}/{name}.
// A Backend without it answers those routes 404.
type ObjectBackend interface {
	// ListObjects lists the objects of kind KindConfigMaps or KindSecrets of every source.
	ListObjects(ctx context.Context, kind string) ([]ObjectSummary, error)
	// ApplyObject creates or replaces an API ConfigMap or Secret from one manifest of that
	// kind; bad input is an *InvalidError.
	ApplyObject(ctx context.Context, kind string, manifest []byte, dryRun bool) (ObjectSummary, error)
	// DeleteObject deletes an API ConfigMap or Secret: ErrNotFound if there is none.
	DeleteObject(ctx context.Context, kind, namespace, name string) error
}

// objectRoutes adds the object and event routes to mux.
func (s *Server) objectRoutes(mux *http.ServeMux) {
	for kind := range kindOf {
		mux.HandleFunc("GET /v1/"+kind, func(w http.ResponseWriter, r *http.Request) { s.listObjects(w, r, kind) })
		mux.HandleFunc("POST /v1/"+kind, func(w http.ResponseWriter, r *http.Request) { s.applyObject(w, r, kind) })
		mux.HandleFunc("DELETE /v1/"+kind+"/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) { s.deleteObject(w, r, kind) })
	}
}

// objects is the backend's ObjectBackend; it answers 404 itself when there is none.
func (s *Server) objects(w http.ResponseWriter) (ObjectBackend, bool) {
	ob, ok := s.backend.(ObjectBackend)
	if !ok {
		writeError(w, http.StatusNotFound, "this daemon keeps no ConfigMaps or Secrets", nil)
	}
	return ob, ok
}

func (s *Server) listObjects(w http.ResponseWriter, r *http.Request, kind string) {
	ob, ok := s.objects(w)
	if !ok {
		return
	}
	items, err := ob.ListObjects(r.Context(), kind)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if items == nil {
		items = []ObjectSummary{}
	}
	writeJSON(w, http.StatusOK, ObjectList{Items: items})
}

func (s *Server) applyObject(w http.ResponseWriter, r *http.Request, kind string) {
	ob, ok := s.objects(w)
	if !ok {
		return
	}
	dry, ok := dryRun(w, r)
	if !ok {
		return
	}
	body, release, ok := s.readManifest(w, r)
	if !ok {
		return
	}
	defer release()
	res, err := ob.ApplyObject(r.Context(), kind, body, dry)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if res.Action == ActionCreated {
		status = http.StatusCreated
	}
	writeJSON(w, status, res)
}

func (s *Server) deleteObject(w http.ResponseWriter, r *http.Request, kind string) {
	ob, ok := s.objects(w)
	if !ok {
		return
	}
	if err := ob.DeleteObject(r.Context(), kind, r.PathValue("namespace"), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ListObjects lists the ConfigMaps (kind KindConfigMaps) or Secrets (KindSecrets).
func (c *Client) ListObjects(ctx context.Context, kind string) ([]ObjectSummary, error) {
	if _, ok := kindOf[kind]; !ok {
		return nil, fmt.Errorf("kind %q: want %s or %s", kind, KindConfigMaps, KindSecrets)
	}
	var list ObjectList
	if err := c.getJSON(ctx, http.MethodGet, "/v1/"+kind, nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ApplyObject creates or replaces a ConfigMap (kind KindConfigMaps) or Secret (KindSecrets).
func (c *Client) ApplyObject(ctx context.Context, kind string, manifest []byte, dryRun bool) (ObjectSummary, error) {
	var res ObjectSummary
	err := c.getJSON(ctx, http.MethodPost, "/v1/"+kind+"?dryRun="+strconv.FormatBool(dryRun), manifest, &res)
	return res, err
}

// DeleteObject deletes an API ConfigMap or Secret.
func (c *Client) DeleteObject(ctx context.Context, kind, namespace, name string) error {
	resp, err := c.do(ctx, http.MethodDelete, "/v1/"+kind+"/"+url.PathEscape(namespace)+"/"+url.PathEscape(name), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// KindPath is the API's path segment of a manifest kind ("ConfigMap" → "configmaps"); "" for
// other kinds.
func KindPath(kind string) string {
	for p, k := range kindOf {
		if k == kind {
			return p
		}
	}
	return ""
}
