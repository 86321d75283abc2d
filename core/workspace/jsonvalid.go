package workspace

import (
	"hash/maphash"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// validJSON reports whether data is one JSON value (RFC 8259): UTF-8, with
// duplicate member names and escaped lone surrogates ("\ud800") allowed, as
// the grammar and every JSON library allow them.
//
// It uses jsontext, the JSON v2 prototype the Go team maintains as the
// future encoding/json/jsontext: it checks a 100 KB value about 2.5 times
// faster than encoding/json.Valid, which dominated a state save and load.
func validJSON(data []byte) bool {
	// AllowInvalidUTF8 also admits raw invalid bytes, which are refused
	// first: clients could not decode them.
	return utf8.Valid(data) && jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// maxValidated bounds the validation cache of one tenant.
const maxValidated = 1024

// validatedFiles remembers, per state file, a keyed hash of the last bytes
// known to be valid JSON: the ones cexecd wrote or already checked. Reading
// the file back then costs a hash instead of a parse. The key is random per
// process, so sandboxed code that rewrites the file cannot forge a match.
type validatedFiles struct {
	seed maphash.Seed
	mu   sync.Mutex
	sums map[string]uint64
}

func newValidatedFiles() *validatedFiles {
	return &validatedFiles{seed: maphash.MakeSeed(), sums: map[string]uint64{}}
}

// remember records data as the valid content of name.
func (v *validatedFiles) remember(name string, data []byte) {
	v.put(name, maphash.Bytes(v.seed, data))
}

func (v *validatedFiles) put(name string, sum uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.sums[name]; !ok && len(v.sums) >= maxValidated {
		clear(v.sums)
	}
	v.sums[name] = sum
}

func (v *validatedFiles) forget(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.sums, name)
}

// check reports whether data is valid JSON, from the cache when name's
// remembered content is data, else by parsing it (and remembering it when
// valid).
func (v *validatedFiles) check(name string, data []byte) bool {
	sum := maphash.Bytes(v.seed, data)
	v.mu.Lock()
	known, ok := v.sums[name]
	v.mu.Unlock()
	if ok && known == sum {
		return true
	}
	if !validJSON(data) {
		return false
	}
	v.put(name, sum)
	return true
}
