// Package web embeds the console (docs/console.md, adr/0020): plain ES
// modules, styles and one HTML page under console/, served by every
// replica at "/" and "/ui/". There is no bundler; the npm libraries the
// console uses (the graph layout) are copied into console/ui/vendor by
// `make web`, a build output git ignores, so a fresh clone builds and
// tests without npm and the console says plainly what is missing.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed all:console
var files embed.FS

// GraphLibrary is the vendored layout library's path under console/.
const GraphLibrary = "ui/vendor/dagre.esm.js"

// Built reports whether `make web` copied the npm libraries in; without
// them the console works but shows a run's tasks as a list, not a graph.
func Built() bool {
	_, err := fs.Stat(root(), GraphLibrary)
	return err == nil
}

func root() fs.FS {
	sub, err := fs.Sub(files, "console")
	if err != nil {
		panic("web: console/ is not embedded: " + err.Error())
	}
	return sub
}

// contentSecurityPolicy allows only this origin: no CDN, no inline
// script, no external font (the console has none).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console page at "/" and its files under "/ui/",
// for GET and HEAD; ok is false for any other path, which the caller
// answers itself (the API's 404).
func Handler() func(w http.ResponseWriter, r *http.Request) (ok bool) {
	fsrv := http.FileServerFS(root())
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return false
		}
		if r.URL.Path != "/" && !strings.HasPrefix(r.URL.Path, "/ui/") {
			return false
		}
		if r.URL.Path != "/" {
			// Files only: no directory listings, nothing that is not there.
			st, err := fs.Stat(root(), strings.TrimPrefix(r.URL.Path, "/"))
			if err != nil || st.IsDir() {
				return false
			}
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		fsrv.ServeHTTP(w, r)
		return true
	}
}
