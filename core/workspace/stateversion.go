package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// ErrStateConflict is a versioned save that found the state at another
// version than the one it was given: someone saved in between, and the
// caller should load it again and retry.
var ErrStateConflict = errors.New("state changed since it was read")

// stateLockFile is the lock versioned saves hold, in the tenant's folder
// (outside the workspace, so sandboxed code cannot hold it), so that
// cexecd replicas sharing DataDir compare and write as one step too.
const stateLockFile = "state.lock"

// StateVersion is the version of a state file's stored bytes: a hash of
// its content, so files sandboxed code writes directly have one too and
// replicas sharing the data folder agree without a counter anywhere. The
// empty string is the version of a state that does not exist. A value
// changed and then changed back has its old version again (the save it
// allows writes over the very value the caller read).
func StateVersion(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// LoadState returns a state file's value as JSON, like GetState, and the
// version to pass to SaveStateIf. A missing file wraps
// pluginapi.ErrNotFound.
func (t *Tenant) LoadState(name string) (json []byte, version string, err error) {
	format, err := ValidateStateName(name)
	if err != nil {
		return nil, "", err
	}
	data, err := t.readState(name)
	if err != nil {
		return nil, "", err
	}
	v, err := t.stateValue(name, format, data)
	return v, StateVersion(data), err
}

// SaveStateIf stores value like SaveState when the stored state is still
// at version (the empty string: when it does not exist), and fails with
// ErrStateConflict otherwise, having written nothing.
func (t *Tenant) SaveStateIf(name string, value []byte, version string) (StateInfo, error) {
	return t.saveState(name, value, &version)
}

// currentVersion returns the version of the stored state name; the caller
// holds wmu (and the state lock when replicas share the folder).
func (t *Tenant) currentVersion(name string) (string, error) {
	data, err := readRegular(t.ws, path.Join(stateDir, name), t.m.opts.MaxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("tenant %s: read state %s: %w", t.id, name, err)
	}
	return StateVersion(data), nil
}

// checkVersion fails with ErrStateConflict unless the stored state name is
// at version want.
func (t *Tenant) checkVersion(name, want string) error {
	have, err := t.currentVersion(name)
	if err != nil {
		return err
	}
	if have == want {
		return nil
	}
	switch {
	case want == "":
		return fmt.Errorf("state %s already exists (version %s); load it and save with its version: %w", name, have, ErrStateConflict)
	case have == "":
		return fmt.Errorf("state %s was deleted since version %s was read: %w", name, want, ErrStateConflict)
	}
	return fmt.Errorf("state %s is at version %s, not %s: someone saved it since it was read; load it again and retry: %w", name, have, want, ErrStateConflict)
}

// lockState takes the tenant's state lock across processes, for a
// versioned save. flock(2) works between replicas on one host and on
// shared volumes whose file system carries it (NFSv4, CephFS).
func (t *Tenant) lockState() (unlock func(), err error) {
	f, err := t.root.OpenFile(stateLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: state lock: %w", t.id, err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("tenant %s: state lock: %w", t.id, err)
	}
	return func() { _ = flock(f, syscall.LOCK_UN); f.Close() }, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
