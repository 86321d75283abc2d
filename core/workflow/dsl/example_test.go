package dsl

import (
	"os"
	"testing"
)

func TestExampleLoads(t *testing.T) {
	src, err := os.ReadFile("../../../workflows/notes-to-memory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load("notes-to-memory.yaml", src); err != nil {
		t.Fatal(err)
	}
}
