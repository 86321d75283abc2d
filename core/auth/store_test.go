package auth

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

func TestStoreRoundTripAndSecrecy(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Tenant: "acme", Server: "github"}
	if _, err := s.Get(k); !errors.Is(err, ErrNoToken) {
		t.Fatalf("empty store: got %v, want ErrNoToken", err)
	}
	rec := &Record{Key: k, Token: transport.Token{AccessToken: "at-SECRET-123", RefreshToken: "rt-SECRET-456", ExpiresAt: time.Now().Add(time.Hour)}, ClientID: "cid"}
	if err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	// A second store over the same folder (a restarted daemon) reads it.
	s2, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	if got.Token.AccessToken != "at-SECRET-123" || got.Token.RefreshToken != "rt-SECRET-456" || got.ClientID != "cid" {
		t.Fatalf("read back %+v", got)
	}
	for _, p := range []string{filepath.Join(dir, "key"), s.file(k)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	raw, _ := os.ReadFile(s.file(k))
	if bytes.Contains(raw, []byte("SECRET")) {
		t.Error("the token file holds the token in the clear")
	}
	if _, err := s.Get(Key{Tenant: "other", Server: "github"}); !errors.Is(err, ErrNoToken) {
		t.Errorf("another tenant's key: got %v, want ErrNoToken", err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Key != k {
		t.Fatalf("List: %v %v", list, err)
	}
	if err := s.Delete(k); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(k); !errors.Is(err, ErrNoToken) {
		t.Fatalf("after Delete: %v", err)
	}
}

// A file moved to another tenant's name must not decrypt as that tenant's.
func TestStoreRejectsSwappedFile(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Key{Tenant: "a", Server: "x"}, Key{Tenant: "b", Server: "x"}
	if err := s.Put(&Record{Key: a, Token: transport.Token{AccessToken: "a-token"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.file(a), s.file(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(b); err == nil {
		t.Fatal("tenant b read tenant a's token")
	}
	// Nor with another key file.
	if err := s.Put(&Record{Key: a, Token: transport.Token{AccessToken: "a-token"}}); err != nil {
		t.Fatal(err)
	}
	other, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other.dir = dir
	if _, err := other.Get(a); err == nil || errors.Is(err, ErrNoToken) {
		t.Fatalf("wrong key: got %v, want a decryption error", err)
	}
}

// TestStoreKeyCreatedOnceByRacingReplicas: daemons opening one fresh
// data_dir at once (replicas starting together) all open the store, with
// one key: a token one of them saves, every other reads.
func TestStoreKeyCreatedOnceByRacingReplicas(t *testing.T) {
	for round := range 50 {
		dir := t.TempDir()
		stores := make([]*Store, 8)
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stores[i], errs[i] = OpenStore(dir)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		k := Key{Tenant: "acme", Server: "sdk"}
		if err := stores[round%len(stores)].Put(&Record{Key: k, Token: transport.Token{AccessToken: "at"}}); err != nil {
			t.Fatal(err)
		}
		for i, s := range stores {
			if r, err := s.Get(k); err != nil || r.Token.AccessToken != "at" {
				t.Fatalf("round %d: store %d reads %+v %v", round, i, r, err)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".key-*")); len(left) > 0 {
			t.Fatalf("round %d: temporary key files left: %v", round, left)
		}
	}
}
