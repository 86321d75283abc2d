package embeddings

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// vecCache is the persistent document-vector cache: one small file per
// vector under dir/<model hash>/<key[:2]>/<key>, where key hashes the model
// and the exact text embedded. Unchanged tools therefore cost nothing after a
// restart, and a different model or text never reads a stale vector.
// Writes go to a temporary file renamed into place, so a crash leaves either
// the old state or a complete file, never a torn one.
type vecCache struct {
	dir string // "" disables persistence
}

// cacheMagic starts every cache file; a file without it is ignored.
var cacheMagic = [4]byte{'C', 'X', 'V', '1'}

// maxCachedDims bounds what a cache file may claim, so a corrupt header
// cannot make a read allocate without limit.
const maxCachedDims = 1 << 16

func newVecCache(root, model string) vecCache {
	if root == "" {
		return vecCache{}
	}
	h := sha256.Sum256([]byte(model))
	return vecCache{dir: filepath.Join(root, hex.EncodeToString(h[:8]))}
}

// cacheKey identifies a vector: the model and the text embedded.
func cacheKey(model, text string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

func (c vecCache) path(key string) string {
	return filepath.Join(c.dir, key[:2], key)
}

// get returns the cached vector for key, or false when absent or unreadable.
func (c vecCache) get(key string) ([]float32, bool) {
	if c.dir == "" {
		return nil, false
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil || len(b) < 8 || [4]byte(b[:4]) != cacheMagic {
		return nil, false
	}
	n := binary.LittleEndian.Uint32(b[4:8])
	if n == 0 || n > maxCachedDims || len(b) != 8+4*int(n) {
		return nil, false
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[8+4*i:]))
	}
	return v, true
}

// put stores v under key atomically.
func (c vecCache) put(key string, v []float32) error {
	if c.dir == "" {
		return nil
	}
	if len(v) == 0 || len(v) > maxCachedDims {
		return errors.New("cache vector: bad dimension")
	}
	dir := filepath.Dir(c.path(key))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cache vector: %w", err)
	}
	b := make([]byte, 8+4*len(v))
	copy(b, cacheMagic[:])
	binary.LittleEndian.PutUint32(b[4:], uint32(len(v)))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[8+4*i:], math.Float32bits(x))
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("cache vector: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cache vector: %w", errors.Join(werr, cerr))
	}
	if err := os.Rename(f.Name(), c.path(key)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cache vector: %w", err)
	}
	return nil
}
