package workspace

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

func TestSaveStateIf(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run("shared="+strconv.FormatBool(shared), func(t *testing.T) {
			m := newManager(t, Options{DataDir: t.TempDir(), SharedDataDir: shared})
			tn := mustTenant(t, m, "acme")

			if _, _, err := tn.LoadState("n.json"); !errors.Is(err, pluginapi.ErrNotFound) {
				t.Fatalf("load of a missing state: %v, want ErrNotFound", err)
			}
			info, err := tn.SaveStateIf("n.json", []byte(`1`), "")
			if err != nil {
				t.Fatalf("create-only save of a missing state: %v", err)
			}
			if _, err := tn.SaveStateIf("n.json", []byte(`1`), ""); !errors.Is(err, ErrStateConflict) {
				t.Fatalf("create-only save of an existing state: %v, want ErrStateConflict", err)
			}
			v, version, err := tn.LoadState("n.json")
			if err != nil || string(v) != "1" || version != info.Version {
				t.Fatalf("load = %s %q %v, want 1 %q", v, version, err, info.Version)
			}
			if _, err := tn.SaveState("n.json", []byte(`2`)); err != nil {
				t.Fatal(err)
			}
			_, err = tn.SaveStateIf("n.json", []byte(`3`), version)
			if !errors.Is(err, ErrStateConflict) {
				t.Fatalf("save with a stale version: %v, want ErrStateConflict", err)
			}
			if ce := m.callError("acme", err); ce.Type != "StateConflict" {
				t.Fatalf("program sees %q, want StateConflict", ce.Type)
			}
			if v, _, _ := tn.LoadState("n.json"); string(v) != "2" {
				t.Fatalf("a refused save wrote %s", v)
			}
		})
	}
}

// TestSaveStateIfConcurrent: twenty concurrent read-modify-write
// increments that retry on conflict end at twenty.
func TestSaveStateIfConcurrent(t *testing.T) {
	m := newManager(t, Options{DataDir: t.TempDir(), SharedDataDir: true})
	tn := mustTenant(t, m, "acme")
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, version, err := tn.LoadState("count.json")
				n := 0
				switch {
				case errors.Is(err, pluginapi.ErrNotFound):
				case err != nil:
					t.Error(err)
					return
				default:
					n, _ = strconv.Atoi(string(v))
				}
				_, err = tn.SaveStateIf("count.json", []byte(strconv.Itoa(n+1)), version)
				if err == nil {
					return
				}
				if !errors.Is(err, ErrStateConflict) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v, _, err := tn.LoadState("count.json"); err != nil || string(v) != "20" {
		t.Fatalf("count = %s %v, want 20", v, err)
	}
}

func TestSharedDataDirRefusesImages(t *testing.T) {
	_, err := New(Options{DataDir: t.TempDir(), SharedDataDir: true, DiskImages: true})
	if !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Fatalf("New with shared data_dir and images: %v, want a refusal", err)
	}
}

// TestDeleteStateTakesSharedLock: with replicas sharing the data_dir, a
// delete waits for the state lock like a save, so it cannot land between
// another replica's version check and its rename (that save would then
// succeed over a state deleted after it was checked, losing the delete).
func TestDeleteStateTakesSharedLock(t *testing.T) {
	dir := t.TempDir()
	a := mustTenant(t, newManager(t, Options{DataDir: dir, SharedDataDir: true}), "acme")
	b := mustTenant(t, newManager(t, Options{DataDir: dir, SharedDataDir: true}), "acme")
	if _, err := a.SaveState("x.json", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	unlock, err := b.lockState() // replica b is between compare and rename
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- a.DeleteState("x.json") }()
	select {
	case err := <-deleted:
		unlock()
		t.Fatalf("DeleteState returned (%v) while another replica held the state lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
}
