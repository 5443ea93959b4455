package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/vigil-sched/vigil/api"
)

var (
	specRouterOnce sync.Once
	specRouter     routers.Router
	specRouterErr  error
)

// pathRouter routes requests by path alone (the document without servers),
// for checking replies inside the harness, whose host is not known ahead.
func pathRouter() (routers.Router, error) {
	specRouterOnce.Do(func() {
		var doc *openapi3.T
		doc, specRouterErr = openapi3.NewLoader().LoadFromData(api.OpenAPI())
		if specRouterErr != nil {
			return
		}
		doc.Servers = nil
		specRouter, specRouterErr = legacy.NewRouter(doc)
	})
	return specRouter, specRouterErr
}

// conformReplies wraps the API handler of a harness so that every reply of
// every API test, to a route of the document, is checked against
// api/openapi.json: its status must be one the operation declares and its
// body must match that status's schema. Requests are not checked, since
// tests send malformed ones on purpose.
func conformReplies(t *testing.T, next http.Handler) http.Handler {
	router, err := pathRouter()
	if err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := router.FindRoute(r)
		if err != nil { // not a route of the document: the catch-all 404
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route}
		err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{IncludeResponseStatus: true},
		})
		if err != nil {
			t.Errorf("%s %s: reply %d does not conform to api/openapi.json: %v\nbody: %s", r.Method, r.URL.Path, rec.Code, err, rec.Body.Bytes())
		}
	})
}
