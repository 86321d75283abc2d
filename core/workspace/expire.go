package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// DefaultSessionTTL is how long a session outlives its last entry when the
// quota sets no other age: its log, checkpoints and PII vault are then
// removed by the background sweep.
const DefaultSessionTTL = 30 * 24 * time.Hour

// sessionTTL is the age after which a session expires.
func (q Quota) sessionTTL() time.Duration {
	if q.SessionTTL > 0 {
		return q.SessionTTL
	}
	return DefaultSessionTTL
}

// ExpireSessions removes every tenant's sessions whose log was last written
// longer ago than the tenant's session TTL: first the PII vault (through
// Options.ExpireVault; a vault in use keeps its session for the next
// sweep), then the log and its summary. It returns how many sessions went.
// The background sweep calls it, never a request.
func (m *Manager) ExpireSessions(ctx context.Context) (int, error) {
	names, err := readDirNames(m.dir)
	if err != nil {
		return 0, fmt.Errorf("expire sessions: %w", err)
	}
	total := 0
	var errs []error
	for _, id := range names {
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		if ValidateTenantID(id) != nil || (m.opts.DeclaredOnly && m.decl(id) == nil) {
			continue
		}
		t, err := m.Tenant(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := t.expireSessions(ctx)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

func (t *Tenant) expireSessions(ctx context.Context) (int, error) {
	if err := t.enter(); err != nil {
		return 0, err
	}
	defer t.exit()
	cutoff := t.m.now().Add(-t.Quota().sessionTTL())
	names, err := readDirNames(t.dir + "/" + sessionsDir)
	if err != nil {
		return 0, fmt.Errorf("tenant %s: expire sessions: %w", t.id, err)
	}
	n := 0
	var errs []error
	for _, name := range names {
		session, ok := strings.CutSuffix(name, logSuffix)
		if !ok || ValidateSessionID(session) != nil || ctx.Err() != nil {
			continue
		}
		gone, err := t.expireSession(session, cutoff)
		if gone {
			n++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// expireSession removes one session if its log is older than cutoff, with
// its saved attachments. The
// append lock keeps an entry from landing in a log being removed.
func (t *Tenant) expireSession(session string, cutoff time.Time) (bool, error) {
	mu := t.sessionLock(session)
	mu.Lock()
	defer mu.Unlock()
	logName := session + logSuffix
	st, err := t.sessions.Lstat(logName)
	if err != nil || !st.ModTime().Before(cutoff) {
		return false, nil
	}
	if ev := t.m.opts.ExpireVault; ev != nil {
		if err := ev(t.id, session); err != nil {
			return false, fmt.Errorf("tenant %s: expire session %s: vault: %w", t.id, session, err)
		}
	}
	if err := t.sessions.Remove(logName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("tenant %s: expire session %s: %w", t.id, session, err)
	}
	_ = t.sessions.Remove(session + metaSuffix)
	if err := t.ws.RemoveAll(AttachmentsDir + "/" + session); err != nil {
		t.m.log.Warn("remove an expired session's attachments", "tenant", t.id, "session", session, "error", err)
	}
	t.m.log.Info("expired session", "tenant", t.id, "session", session, "last_write", st.ModTime().UTC())
	return true, nil
}

// expireLoop runs ExpireSessions every interval until stop closes.
func (m *Manager) expireLoop(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if n, err := m.ExpireSessions(context.Background()); err != nil {
				m.log.Warn("expire sessions", "expired", n, "error", err)
			}
		}
	}
}
