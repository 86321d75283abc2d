//go:build ignore

// generate writes application.pdf, the AcroForm the fill-pdf-form workflow
// fills, with pdfcpu's own form creation (api.Create from JSON):
//
//	go run ./examples/forms/generate.go
//
// It is run by hand and its output committed, so the example and the tests
// use the same, real PDF.
package main

import (
	"bytes"
	"log"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

const spec = `{
  "paper": "A4P",
  "origin": "LowerLeft",
  "fonts": {
    "input": {"name": "Helvetica", "size": 12},
    "label": {"name": "Helvetica", "size": 10, "col": "Gray"}
  },
  "header": {"font": {"name": "Helvetica-Bold", "size": 18}, "center": "Membership application", "height": 40},
  "pages": {
    "1": {
      "content": {
        "textfield": [
          {"id": "name", "tip": "Full name", "tab": 1, "pos": [140, 700], "width": 250,
           "border": {"width": 1, "col": "Gray"}, "label": {"value": "Full name:", "width": 100, "gap": 10, "pos": "left"}},
          {"id": "email", "tip": "Email", "tab": 2, "pos": [140, 670], "width": 250,
           "border": {"width": 1, "col": "Gray"}, "label": {"value": "Email:", "width": 100, "gap": 10, "pos": "left"}},
          {"id": "city", "tip": "City", "tab": 3, "pos": [140, 640], "width": 250,
           "border": {"width": 1, "col": "Gray"}, "label": {"value": "City:", "width": 100, "gap": 10, "pos": "left"}}
        ],
        "combobox": [
          {"id": "plan", "tip": "Plan", "tab": 4, "options": ["basic", "standard", "premium"], "default": "standard",
           "pos": [140, 610], "width": 150, "border": {"width": 1, "col": "Gray"},
           "label": {"value": "Plan:", "width": 100, "gap": 10, "pos": "left"}}
        ],
        "checkbox": [
          {"id": "newsletter", "tip": "Newsletter", "tab": 5, "pos": [140, 580], "width": 12,
           "label": {"value": "Newsletter:", "width": 100, "gap": 10, "pos": "left"}}
        ]
      }
    }
  }
}`

func main() {
	// No config.yml under the user's config folder.
	model.ConfigPath = "disable"
	_, self, _, _ := runtime.Caller(0)
	var out bytes.Buffer
	if err := api.Create(nil, bytes.NewReader([]byte(spec)), &out, nil); err != nil {
		log.Fatalf("create form: %v", err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(self), "application.pdf"), out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
