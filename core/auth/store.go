package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"golang.org/x/sys/unix"
)

// Key names one sign-in: a tenant's to a server.
type Key struct {
	Tenant string `json:"tenant"`
	Server string `json:"server"`
}

func (k Key) String() string { return k.Tenant + "/" + k.Server }

// Record is what is kept of one sign-in: the token and the client it was
// issued to (a dynamically registered client must be reused to refresh).
type Record struct {
	Key
	Token        transport.Token `json:"token"`
	ClientID     string          `json:"client_id,omitempty"`
	ClientSecret string          `json:"client_secret,omitempty"`
	AuthMethod   string          `json:"auth_method,omitempty"`
	Issuer       string          `json:"issuer,omitempty"`
	TokenURL     string          `json:"token_endpoint,omitempty"`
	Resource     string          `json:"resource,omitempty"`
	Updated      time.Time       `json:"updated"`
}

// ErrNoToken: nobody signed in for that key.
var ErrNoToken = errors.New("not signed in")

// Store keeps Records encrypted at rest. AES-GCM with a key file rather
// than the OS keyring: cexecd is a headless daemon, often without a
// session keyring, and a key file beside the data keeps a copied or backed
// up token folder useless without it. Each file's additional data is its
// key, so files cannot be swapped between tenants.
type Store struct {
	dir  string
	aead cipher.AEAD
	mu   sync.Mutex
}

// OpenStore opens (creating) the store in dir, its key in dir/key.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tokens"), 0o700); err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	key, err := loadKey(filepath.Join(dir, "key"))
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	return &Store{dir: dir, aead: aead}, nil
}

func loadKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil {
		if len(key) != 32 {
			return nil, fmt.Errorf("token store key %s: %d bytes, want 32", path, len(key))
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Replicas sharing a data_dir may start together: the key appears
	// whole or not at all (written aside, then linked, which fails when
	// another process linked its key first), so nobody reads a half
	// written one, and a crash cannot leave an empty key behind.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("token store key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("token store key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadKey(path)
		}
		return nil, fmt.Errorf("token store key: %w", err)
	}
	return key, nil
}

func (s *Store) file(k Key) string {
	sum := sha256.Sum256([]byte(k.Tenant + "\x00" + k.Server))
	return filepath.Join(s.dir, "tokens", hex.EncodeToString(sum[:16])+".tok")
}

func aad(k Key) []byte { return []byte("cexec-token\x00" + k.Tenant + "\x00" + k.Server) }

// Get returns k's record, or an error wrapping ErrNoToken.
func (s *Store) Get(k Key) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.read(s.file(k), &k)
}

func (s *Store) read(path string, want *Key) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoToken
	}
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	ns := s.aead.NonceSize()
	if len(b) < ns+9 || string(b[:8]) != "cexectk1" {
		return nil, fmt.Errorf("read token %s: not a token file", filepath.Base(path))
	}
	b = b[8:]
	// The key of a file found by listing is in its header, authenticated
	// as additional data.
	var k Key
	hdrLen := int(b[0])
	if len(b) < 1+hdrLen+ns {
		return nil, fmt.Errorf("read token %s: truncated", filepath.Base(path))
	}
	if err := json.Unmarshal(b[1:1+hdrLen], &k); err != nil {
		return nil, fmt.Errorf("read token %s: %w", filepath.Base(path), err)
	}
	if want != nil && k != *want {
		return nil, fmt.Errorf("read token %s: belongs to %s, not %s", filepath.Base(path), k, want)
	}
	b = b[1+hdrLen:]
	plain, err := s.aead.Open(nil, b[:ns], b[ns:], aad(k))
	if err != nil {
		return nil, fmt.Errorf("read token %s: cannot decrypt (wrong key or altered file)", filepath.Base(path))
	}
	var r Record
	if err := json.Unmarshal(plain, &r); err != nil {
		return nil, fmt.Errorf("read token %s: %w", filepath.Base(path), err)
	}
	r.Key = k
	return &r, nil
}

// Put writes r atomically: a temporary file, synced, renamed over the old.
func (s *Store) Put(r *Record) error {
	r.Updated = time.Now().UTC()
	plain, err := json.Marshal(r)
	if err != nil {
		return err
	}
	hdr, _ := json.Marshal(r.Key)
	if len(hdr) > 255 {
		return fmt.Errorf("save token: key %s too long", r.Key)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	out := append([]byte("cexectk1"), byte(len(hdr)))
	out = append(out, hdr...)
	out = append(out, nonce...)
	out = s.aead.Seal(out, nonce, plain, aad(r.Key))
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.file(r.Key)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tok-*")
	if err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return fmt.Errorf("save token: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	return nil
}

// lockKey takes k's lock across processes (flock on a file beside its
// token), for replicas sharing data_dir/auth: a refresh token that rotates
// is spent by the first refresh, so only one process may refresh at a
// time, and the others read what it saved. Call unlock when done.
func (s *Store) lockKey(k Key) (unlock func(), err error) {
	path := strings.TrimSuffix(s.file(k), ".tok") + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock token: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock token: %w", err)
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}

// Delete removes k's record; a missing one is no error.
func (s *Store) Delete(k Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(s.file(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete token: %w", err)
	}
	return nil
}

// List returns every record, by tenant then server; unreadable files are
// reported in the error and skipped.
func (s *Store) List() ([]*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(filepath.Join(s.dir, "tokens"))
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	var out []*Record
	var errs []error
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tok") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		r, err := s.read(filepath.Join(s.dir, "tokens", e.Name()), nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Record) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	return out, errors.Join(errs...)
}
