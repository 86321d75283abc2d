package vault

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
)

// entry is one value and its token [Type_N].
type entry struct {
	Type  string `json:"type"`
	N     uint64 `json:"n"`
	Value string `json:"value"`
}

// state is the in-memory vault of one session, shared by every Vault
// opened on it.
type state struct {
	tenant, session string
	// save stores an encoded snapshot durably (a file, or the Persister).
	save       func(data []byte) error
	maxEntries int
	log        hclog.Logger
	refs       int // guarded by Store.mu

	mu       sync.RWMutex
	entries  []entry
	byKey    map[valueKey]int
	byToken  map[string]int // "[TYPE_N]" → index
	reserved map[string]bool
	next     map[string]uint64 // lowest number per type not yet tried
	gen      uint64            // bumped on every change

	// wmu serializes writes of the file; written is the generation on
	// disk, set under wmu.
	wmu     sync.Mutex
	written atomic.Uint64
}

func newState(tenant, session string, log hclog.Logger, maxEntries int, save func([]byte) error) *state {
	return &state{
		tenant: tenant, session: session, save: save, maxEntries: maxEntries, log: log,
		byKey: map[valueKey]int{}, byToken: map[string]int{}, reserved: map[string]bool{}, next: map[string]uint64{},
	}
}

// restore fills an empty state from a vault file, checking that it could
// have been written by this package.
func (st *state) restore(f fileFormat) error {
	for _, r := range f.Reserved {
		if end, ok := tokenAt(r, 0); !ok || end != len(r) {
			return fmt.Errorf("reserved entry %d is not a token", len(st.reserved))
		}
		st.reserved[r] = true
	}
	for i, e := range f.Entries {
		if e.N == 0 || tokenType(e.Type) != e.Type {
			return fmt.Errorf("entry %d has an invalid type or number", i)
		}
		tok := tokenText(e.Type, e.N)
		if _, dup := st.byToken[tok]; dup || st.reserved[tok] {
			return fmt.Errorf("entry %d repeats a token", i)
		}
		st.byToken[tok] = i
		// Two stored values may normalize alike when the rules changed
		// since they were written; the first keeps the key, and both
		// tokens keep working.
		if k := key(e.Type, e.Value); !st.hasKey(k) {
			st.byKey[k] = i
		}
		if e.N >= st.next[e.Type] {
			st.next[e.Type] = e.N + 1
		}
	}
	st.entries = f.Entries
	return nil
}

func (st *state) hasKey(k valueKey) bool {
	_, ok := st.byKey[k]
	return ok
}

// valueKey identifies a value: equal keys share a token.
type valueKey struct{ typ, norm string }

func key(typ, value string) valueKey {
	return valueKey{typ, normalize(typ, value)}
}

// tokenFor returns the token of a value, issuing one if the value is new.
// The caller holds st.mu for writing.
func (st *state) tokenFor(typ, value string) (string, error) {
	k := key(typ, value)
	if i, ok := st.byKey[k]; ok {
		e := st.entries[i]
		return tokenText(e.Type, e.N), nil
	}
	if err := st.full(); err != nil {
		return "", err
	}
	n := max(st.next[typ], 1)
	tok := tokenText(typ, n)
	for st.reserved[tok] {
		n++
		tok = tokenText(typ, n)
	}
	st.next[typ] = n + 1
	st.byKey[k] = len(st.entries)
	st.byToken[tok] = len(st.entries)
	st.entries = append(st.entries, entry{Type: typ, N: n, Value: value})
	st.gen++
	return tok, nil
}

// full fails when the vault holds MaxEntries values and reservations:
// text from a tool can make a vault grow, and must not make it grow
// without bound.
func (st *state) full() error {
	if len(st.entries)+len(st.reserved) >= st.maxEntries {
		return fmt.Errorf("vault %s/%s holds %d values and reservations, the limit; new values are withheld (the text is not passed on), start a new session: %w", st.tenant, st.session, st.maxEntries, pluginapi.ErrResourceExhausted)
	}
	return nil
}

// reserve keeps a token-shaped string from ever being issued. The caller
// holds st.mu for writing and has checked that tok is not issued.
func (st *state) reserve(tok string) error {
	if st.reserved[tok] {
		return nil
	}
	if err := st.full(); err != nil {
		return err
	}
	st.reserved[tok] = true
	st.gen++
	return nil
}

// lookup returns the value of an issued token. The caller holds st.mu.
func (st *state) lookup(tok string) (string, bool) {
	i, ok := st.byToken[tok]
	if !ok {
		return "", false
	}
	return st.entries[i].Value, true
}

// unsaved reports whether the state has changes not yet on disk (a write
// failed). The caller holds st.mu.
func (st *state) unsaved() bool {
	return st.gen > st.written.Load()
}

// snapshot encodes the state for writing. The caller holds st.mu.
func (st *state) snapshot() ([]byte, uint64, error) {
	f := fileFormat{Version: fileVersion, Tenant: st.tenant, Session: st.session, Entries: st.entries}
	if len(st.reserved) > 0 {
		f.Reserved = slices.Sorted(maps.Keys(st.reserved))
	}
	data, err := json.Marshal(f)
	return data, st.gen, err
}

// persist writes the state to disk unless a write of generation gen or a
// later one already happened. Snapshots are taken under st.mu and are
// cumulative, so skipping an older one loses nothing, and a caller whose
// change is in gen may rely on it being durable when persist returns.
func (st *state) persist(data []byte, gen uint64) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if gen <= st.written.Load() {
		return nil
	}
	if err := st.save(data); err != nil {
		st.log.Warn("vault save failed", "tenant", st.tenant, "session", st.session, "error", err)
		return fmt.Errorf("vault %s/%s: save: %w", st.tenant, st.session, err)
	}
	st.written.Store(gen)
	st.log.Trace("vault saved", "tenant", st.tenant, "session", st.session, "bytes", len(data))
	return nil
}
