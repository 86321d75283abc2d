package bwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// etcRecheck is how often the host's /etc entries are compared with the
// copy sandboxes see: a change reaches sandboxes started after the next
// check.
const etcRecheck = 5 * time.Second

// etcView is the /etc of sandboxes: a copy of the host's etcFiles plus the
// generated passwd, group and hosts, bound as one directory. bwrap reads the
// whole mount table again for every bind, so the twenty binds this replaces
// cost about 2 ms of every sandbox start. Only what any user of the host
// may read is copied. A sandbox keeps the copy it started with; a copy
// that no sandbox uses any more and that is out of date is removed.
type etcView struct {
	// root is prefixed to etcFiles; "" is the host (tests use a tree).
	root string
	log  hclog.Logger

	mu      sync.Mutex
	cur     *etcCopy
	sig     string
	checked time.Time
	// checking is set while a recheck runs in the background; bg counts
	// it, for close and tests.
	checking bool
	bg       sync.WaitGroup
}

// etcCopy is one copy of /etc and the number of sandboxes started on it.
type etcCopy struct {
	dir     string
	refs    int
	retired bool
}

// acquire returns the current copy for a new sandbox; release it when the
// sandbox is gone. Only the first copy is built on the way: a due recheck
// runs in the background, since walking the host's entries takes 5-12 ms
// (about 1,500 system calls on a stock Debian) and would otherwise land on
// the start of the first sandbox after every quiet spell. That sandbox gets
// the copy it would have got a moment earlier; a change reaches the
// sandboxes started after the walk.
func (v *etcView) acquire(now time.Time) (*etcCopy, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.cur == nil:
		removeStaleTemp(etcPrefix)
		sig := etcSignature(v.root)
		dir, err := buildEtc(v.root)
		if err != nil {
			return nil, err
		}
		v.cur, v.sig, v.checked = &etcCopy{dir: dir}, sig, now
	case now.Sub(v.checked) >= etcRecheck && !v.checking:
		v.checking, v.checked = true, now
		v.bg.Add(1)
		go v.recheck(v.sig)
	}
	v.cur.refs++
	return v.cur, nil
}

// recheck builds a new copy when the host's entries no longer match old,
// the signature of the current one.
func (v *etcView) recheck(old string) {
	defer v.bg.Done()
	sig := etcSignature(v.root)
	dir, err := "", error(nil)
	if sig != old {
		dir, err = buildEtc(v.root)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.checking = false
	switch {
	case err != nil:
		// Sandboxes keep starting on the current copy; the next due
		// check tries again.
		v.log.Warn("sandboxes keep the earlier copy of /etc", "error", err)
	case dir == "":
	case v.cur == nil:
		// Closed meanwhile.
		_ = os.RemoveAll(dir)
	default:
		v.retire()
		v.cur, v.sig = &etcCopy{dir: dir}, sig
	}
}

// release drops a sandbox's hold on c.
func (v *etcView) release(c *etcCopy) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c.refs--
	if c.retired && c.refs == 0 {
		_ = os.RemoveAll(c.dir)
	}
}

// close removes the current copy once its sandboxes are gone (the plugin
// destroys them all before).
func (v *etcView) close() {
	v.bg.Wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.retire()
	v.cur, v.sig = nil, ""
}

func (v *etcView) retire() {
	if v.cur == nil {
		return
	}
	v.cur.retired = true
	if v.cur.refs == 0 {
		_ = os.RemoveAll(v.cur.dir)
	}
}

const etcPrefix = "cexec-bwrap-etc-"

// buildEtc copies the host's entries into a new directory readable by
// every user, and writes the generated files.
func buildEtc(root string) (string, error) {
	dir, err := os.MkdirTemp("", tempPattern(etcPrefix))
	if err != nil {
		return "", fmt.Errorf("copy /etc for sandboxes: %w", err)
	}
	err = os.Chmod(dir, 0o755)
	for _, f := range etcFiles {
		if err != nil {
			break
		}
		err = copyEtcEntry(root+f, filepath.Join(dir, strings.TrimPrefix(f, "/etc/")))
	}
	generated := map[string]string{
		"passwd": passwdData, "group": groupData, "hosts": hostsData,
		// Where a networked sandbox's own resolv.conf is bound.
		"resolv.conf": "",
	}
	for name, data := range generated {
		if err != nil {
			break
		}
		err = os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("copy /etc for sandboxes: %w", err)
	}
	return dir, nil
}

// copyEtcEntry copies src (a file, a symlink or a directory tree) to dst.
// Entries that other users may not read, and special files, are left out:
// the sandbox user is no one on the host. A missing src is skipped.
func copyEtcEntry(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == src && os.IsNotExist(err) {
				return nil
			}
			if d != nil && d.IsDir() && os.IsPermission(err) {
				return fs.SkipDir
			}
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case mode.IsDir():
			if mode.Perm()&0o005 != 0o005 {
				return fs.SkipDir
			}
			return os.Mkdir(to, 0o755)
		case mode.IsRegular():
			if mode.Perm()&0o004 == 0 {
				return nil
			}
			return copyFile(path, to, 0o644|mode.Perm()&0o111)
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The umask may have taken bits away.
		err = os.Chmod(dst, perm)
	}
	return err
}

// etcSignature sums what the copy depends on: the name, type, mode, size,
// modification time and link target of every entry under etcFiles.
func etcSignature(root string) string {
	h := sha256.New()
	for _, f := range etcFiles {
		_ = filepath.WalkDir(root+f, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s\x00error\x00", path)
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			target := ""
			if info.Mode()&fs.ModeSymlink != 0 {
				target, _ = os.Readlink(path)
			}
			fmt.Fprintf(h, "%s\x00%v\x00%d\x00%d\x00%s\x00", path, info.Mode(), info.Size(), info.ModTime().UnixNano(), target)
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))
}
