package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
)

// Detector finds sensitive spans in text. The host's guard aggregator
// implements it over the configured guard plugins; tests and benchmarks
// may use a detector in process.
type Detector interface {
	Detect(ctx context.Context, req guard.DetectRequest) ([]guard.Span, error)
}

// DefaultMaxEntries bounds the values one vault holds when
// Options.MaxEntries is zero: far more distinct values than an agent's
// session shows a model, and small enough that a full vault loads and
// saves in milliseconds (240k entries took seconds per execution).
const DefaultMaxEntries = 1 << 14

// maxIdle is how many vaults no request holds stay loaded, so that a
// session's next execution does not parse its whole vault again.
const maxIdle = 64

// ErrInUse is returned by Delete for a vault that is open.
var ErrInUse = errors.New("vault is open")

// sessionRE is the session id rule of core/workspace: one path component.
var sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Options configure a Store.
type Options struct {
	// DataDir is cexecd's data_dir (absolute). Vaults live in
	// DataDir/tenants/<tenant>/vaults/<session>.json, next to the
	// tenant's workspace and never inside it, so sandboxed code cannot
	// read the real values back.
	DataDir string
	// Types restricts detection to these types (nil: whatever the
	// detectors report).
	Types []string
	// MaxEntries bounds the values plus reserved token-shaped strings one
	// vault holds (0: DefaultMaxEntries). Tokenizing beyond it fails
	// rather than pass a value through in the clear.
	MaxEntries int
	// Logger receives lifecycle messages (never a value or a token).
	Logger hclog.Logger
	// Persister, when set, keeps vaults instead of files under DataDir
	// (core/store's PostgreSQL, encrypted, shared by replicas).
	Persister Persister
}

// Persister keeps encoded vaults somewhere shared. Every call is made
// before the change it stores is acknowledged, as with files.
type Persister interface {
	// LoadVault returns the vault as SaveVault got it, or nil when there is
	// none.
	LoadVault(ctx context.Context, tenant, session string) ([]byte, error)
	SaveVault(ctx context.Context, tenant, session string, data []byte) error
	DeleteVault(ctx context.Context, tenant, session string) error
}

// persistTimeout bounds one call to the Persister.
const persistTimeout = 30 * time.Second

// Store opens per-session vaults under a data_dir. It is safe for
// concurrent use. Each open vault is held in memory once, whoever opens
// it, so concurrent requests of one session agree on every token.
type Store struct {
	opts Options
	log  hclog.Logger

	mu   sync.Mutex
	open map[string]*state // by tenant + "/" + session; idle ones too
	idle []*state          // loaded, held by no request; oldest first
	// loads counts vaults read from disk (tests).
	loads atomic.Int64
}

// NewStore checks opts and returns a Store. It touches no files; folders
// are created by the first Open of a tenant.
func NewStore(opts Options) (*Store, error) {
	if !filepath.IsAbs(opts.DataDir) {
		return nil, fmt.Errorf("vault: data_dir %q is not absolute: %w", opts.DataDir, pluginapi.ErrInvalidArgument)
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Store{opts: opts, log: log.Named("vault"), open: map[string]*state{}}, nil
}

// Path returns the file of a session's vault. It does not check the ids.
func (s *Store) Path(tenant, session string) string {
	return filepath.Join(s.opts.DataDir, "tenants", tenant, "vaults", session+".json")
}

// Open returns the vault of a tenant's session, loading it from disk the
// first time (a vault survives daemon restarts) and creating it empty
// when there is none. det detects values for Tokenize; nil means only
// text that looks like a token is protected. Close the Vault when done:
// the state stays loaded after its last user closes it, among the maxIdle
// most recently used, so a session's next execution does not read it again.
func (s *Store) Open(tenant, session string, det Detector) (*Vault, error) {
	if err := config.ValidateTenantID(tenant); err != nil {
		return nil, fmt.Errorf("vault: %w: %w", err, pluginapi.ErrInvalidArgument)
	}
	if !sessionRE.MatchString(session) || strings.Contains(session, "..") {
		return nil, fmt.Errorf("vault: invalid session id %q: %w", session, pluginapi.ErrInvalidArgument)
	}
	key := tenant + "/" + session
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.open[key]
	if st == nil {
		var err error
		if st, err = s.load(tenant, session); err != nil {
			return nil, err
		}
		s.open[key] = st
	}
	st.refs++
	return &Vault{store: s, st: st, det: det}, nil
}

// Delete removes a session's vault from disk. It fails with ErrInUse
// while the vault is open. Deleting a vault that does not exist is not an
// error.
func (s *Store) Delete(tenant, session string) error {
	if err := config.ValidateTenantID(tenant); err != nil {
		return fmt.Errorf("vault: %w: %w", err, pluginapi.ErrInvalidArgument)
	}
	if !sessionRE.MatchString(session) || strings.Contains(session, "..") {
		return fmt.Errorf("vault: invalid session id %q: %w", session, pluginapi.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.open[tenant+"/"+session]; st != nil {
		if st.refs > 0 {
			return fmt.Errorf("vault %s/%s: %w", tenant, session, ErrInUse)
		}
		s.forget(st)
	}
	if p := s.opts.Persister; p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
		defer cancel()
		if err := p.DeleteVault(ctx, tenant, session); err != nil {
			return fmt.Errorf("vault %s/%s: delete: %w", tenant, session, err)
		}
		return nil
	}
	if err := os.Remove(s.Path(tenant, session)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("vault %s/%s: delete: %w", tenant, session, err)
	}
	return nil
}

// Forget drops a session's vault from memory unless a request holds it, so
// the next Open reads it again: another replica changed it.
func (s *Store) Forget(tenant, session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.open[tenant+"/"+session]; st != nil && st.refs == 0 {
		s.forget(st)
	}
}

// ForgetIdle drops every vault no request holds from memory: news of
// other replicas' changes may have been missed.
func (s *Store) ForgetIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.open {
		if st.refs == 0 {
			s.forget(st)
		}
	}
}

func (s *Store) release(st *state) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.refs--
	if st.refs > 0 {
		return
	}
	s.idle = append(slices.DeleteFunc(s.idle, func(x *state) bool { return x == st }), st)
	for len(s.idle) > maxIdle {
		old := s.idle[0]
		s.idle = s.idle[1:]
		if old.refs == 0 {
			delete(s.open, old.tenant+"/"+old.session)
		}
	}
}

// forget drops an idle vault from memory. Called with s.mu held.
func (s *Store) forget(st *state) {
	delete(s.open, st.tenant+"/"+st.session)
	s.idle = slices.DeleteFunc(s.idle, func(x *state) bool { return x == st })
}

// dir creates the tenant's vault folder (0700) and returns it.
func (s *Store) dir(tenant string) (string, error) {
	dir := filepath.Join(s.opts.DataDir, "tenants", tenant, "vaults")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	// MkdirAll leaves an existing folder as it was; the vault's folder is
	// the daemon's alone.
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// fileFormat is the JSON of a vault file.
type fileFormat struct {
	Version int    `json:"version"`
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// Entries in the order their tokens were issued.
	Entries []entry `json:"entries"`
	// Reserved are token-shaped strings seen in text that never get
	// issued (see Tokenize).
	Reserved []string `json:"reserved,omitempty"`
}

const fileVersion = 1

func (s *Store) load(tenant, session string) (*state, error) {
	if s.opts.Persister != nil {
		return s.loadPersisted(tenant, session)
	}
	dir, err := s.dir(tenant)
	if err != nil {
		return nil, fmt.Errorf("vault %s/%s: create folder: %w", tenant, session, err)
	}
	path := filepath.Join(dir, session+".json")
	// A crash between creating a temporary file and renaming it leaves
	// the file behind; nothing else writes this session's temporaries.
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+session+".json.tmp-*")); len(stale) > 0 {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	st := newState(tenant, session, s.log, s.opts.MaxEntries, func(data []byte) error { return writeFile(path, data) })
	s.loads.Add(1)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.log.Debug("new vault", "tenant", tenant, "session", session)
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("vault %s/%s: %w", tenant, session, err)
	}
	return s.decode(st, path, data)
}

// loadPersisted is load from the Persister.
func (s *Store) loadPersisted(tenant, session string) (*state, error) {
	p := s.opts.Persister
	st := newState(tenant, session, s.log, s.opts.MaxEntries, func(data []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
		defer cancel()
		return p.SaveVault(ctx, tenant, session, data)
	})
	s.loads.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	data, err := p.LoadVault(ctx, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("vault %s/%s: %w", tenant, session, err)
	}
	if data == nil {
		s.log.Debug("new vault", "tenant", tenant, "session", session)
		return st, nil
	}
	return s.decode(st, "the stored vault", data)
}

// decode restores st from a vault's encoding read from where.
func (s *Store) decode(st *state, where string, data []byte) (*state, error) {
	tenant, session, path := st.tenant, st.session, where
	var f fileFormat
	if err := json.Unmarshal(data, &f); err != nil {
		// Only the offset: encoding/json's messages can quote content.
		var se *json.SyntaxError
		off := int64(-1)
		if errors.As(err, &se) {
			off = se.Offset
		}
		return nil, fmt.Errorf("vault %s/%s: %s is corrupt (JSON error near byte %d)", tenant, session, path, off)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("vault %s/%s: %s has version %d, want %d", tenant, session, path, f.Version, fileVersion)
	}
	if err := st.restore(f); err != nil {
		return nil, fmt.Errorf("vault %s/%s: %s is corrupt: %w", tenant, session, path, err)
	}
	s.log.Debug("vault loaded", "tenant", tenant, "session", session, "entries", len(st.entries))
	return st, nil
}

// write replaces path with data atomically and durably: a temporary file
// in the same folder, fsync, rename, fsync of the folder. Readers see the
// old or the new vault, never a mix, even after a crash.
func writeFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600 already; say so explicitly, since
	// the mode is the point.
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
