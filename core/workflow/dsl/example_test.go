package dsl

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamplesLoad loads every shared workflow of the repository.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../../../workflows/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shared workflows: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Load(filepath.Base(f), src); err != nil {
			t.Errorf("%v", err)
		}
	}
}
