package embeddings

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestVecCache(t *testing.T) {
	root := t.TempDir()
	c := newVecCache(root, "model-a")
	key := cacheKey("model-a", "some tool text")
	if _, ok := c.get(key); ok {
		t.Fatal("hit in an empty cache")
	}
	v := []float32{0.5, -1, 3.25}
	if err := c.put(key, v); err != nil {
		t.Fatal(err)
	}
	got, ok := c.get(key)
	if !ok || !slices.Equal(got, v) {
		t.Fatalf("get = %v %v, want %v", got, ok, v)
	}
	// Keys differ by model and by text; another model never sees the vector.
	if cacheKey("model-b", "some tool text") == key || cacheKey("model-a", "other") == key {
		t.Fatal("cache key ignores model or text")
	}
	if _, ok := newVecCache(root, "model-b").get(key); ok {
		t.Fatal("vector visible under another model's directory")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(c.path(key)))
	if len(entries) != 1 {
		t.Fatalf("cache dir holds %d files, want 1", len(entries))
	}
	// Corrupt or truncated files read as misses, not as garbage vectors.
	for _, bad := range [][]byte{nil, []byte("CXV1"), []byte("XXXX\x03\x00\x00\x00"), append([]byte("CXV1\x09\x00\x00\x00"), make([]byte, 12)...)} {
		if err := os.WriteFile(c.path(key), bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, ok := c.get(key); ok {
			t.Fatalf("corrupt file %q read as %v", bad, got)
		}
	}
	// Disabled cache: puts succeed and gets miss.
	off := newVecCache("", "m")
	if err := off.put(key, v); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.get(key); ok {
		t.Fatal("disabled cache hit")
	}
}
