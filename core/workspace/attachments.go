package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/cexec/cexec/pluginapi"
)

// AttachmentsDir is the folder of the workspace where content a program
// showed (cexec.show) is saved when it is too large to travel inline:
// attachments/<session>/<id><ext>, also visible to programs as
// /workspace/attachments.
const AttachmentsDir = "attachments"

// maxAttachmentExt bounds the extension kept from what the program named.
const maxAttachmentExt = 8

// SaveAttachment stores data as one of session's attachments and returns its
// path relative to the workspace (attachments/<session>/<id><ext>). name is
// what the program called it; only its extension is kept, because the path
// reaches the agent in the attachment's URI, which no guard tokenizes (it
// must resolve): a name such as "jane@example.com.csv" would carry the
// value the attachment's tokenized name hides. A random id keeps every
// attachment apart. The write is atomic and held to the tenant's disk quota
// (an error wrapping ErrQuotaExceeded).
func (t *Tenant) SaveAttachment(session, name string, data []byte) (string, error) {
	if err := ValidateSessionID(session); err != nil {
		return "", err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	file := hex.EncodeToString(id[:]) + attachmentExt(name)
	if err := t.enter(); err != nil {
		return "", err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err := t.reserve("attachment "+file, 0, int64(len(data))); err != nil {
		return "", err
	}
	dir := path.Join(AttachmentsDir, session)
	if err := mkdirs(t.ws, t.owner, AttachmentsDir, dir); err != nil {
		return "", fmt.Errorf("tenant %s: save attachment: %w", t.id, err)
	}
	if err := writeAtomic(t.ws, dir, file, data, atomicWrite{sync: t.m.opts.Sync.stateWrite(), own: t.owner}); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return "", fmt.Errorf("tenant %s: save attachment: the disk is full, nothing was written: %w: %w", t.id, err, pluginapi.ErrResourceExhausted)
		}
		return "", fmt.Errorf("tenant %s: save attachment: %w", t.id, err)
	}
	t.wrote(int64(len(data)))
	return path.Join(dir, file), nil
}

// ReadAttachment returns a saved attachment by the path SaveAttachment
// returned. Only files under attachments/ are served, through the
// workspace root, so neither ".." nor a symlink a program planted leads
// out of the tenant's workspace. A missing file wraps pluginapi.ErrNotFound.
func (t *Tenant) ReadAttachment(rel string) ([]byte, error) {
	clean := path.Clean(rel)
	if clean != rel || !strings.HasPrefix(clean, AttachmentsDir+"/") || strings.Count(clean, "/") != 2 {
		return nil, fmt.Errorf("no attachment %q: %w", rel, pluginapi.ErrNotFound)
	}
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	st, err := t.ws.Lstat(clean)
	if err == nil && !st.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no attachment %q: %w", rel, pluginapi.ErrNotFound)
		}
		return nil, fmt.Errorf("tenant %s: read attachment: %w", t.id, err)
	}
	t.touch()
	return t.ws.ReadFile(clean)
}

// attachmentExt is name's extension with its dot, lowercased, when it is 1
// to maxAttachmentExt letters and digits (too short to hold an e-mail, a
// card or an SSN); "" otherwise.
func attachmentExt(name string) string {
	ext := strings.ToLower(path.Ext(strings.ReplaceAll(name, "\\", "/")))
	if len(ext) < 2 || len(ext) > 1+maxAttachmentExt {
		return ""
	}
	for _, r := range ext[1:] {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return ""
		}
	}
	return ext
}
