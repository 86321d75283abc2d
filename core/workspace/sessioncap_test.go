package workspace

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionLogCap: a session's log stops at its bound (max_session_log,
// default DefaultMaxSessionLog); the refused entry leaves nothing behind,
// and the error names the cap and what to do.
func TestSessionLogCap(t *testing.T) {
	blob := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	tests := []struct {
		name  string
		quota Quota
		size  int   // checkpoint context per entry
		max   int64 // the bound in force
	}{
		{"configured", Quota{MaxSessionLog: 16 << 10}, 1 << 10, 16 << 10},
		{"default", Quota{}, MaxCheckpointSize, DefaultMaxSessionLog},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, Options{DefaultQuota: tc.quota, Sync: SyncNone})
			tn := mustTenant(t, m, "acme")
			logPath := filepath.Join(m.opts.DataDir, "tenants", "acme", "sessions", "s"+logSuffix)
			var err error
			for i := 0; err == nil; i++ {
				if int64(i*tc.size) > 2*tc.max {
					t.Fatalf("%d checkpoints of %d bytes went through; the bound is %d", i, tc.size, tc.max)
				}
				_, err = tn.Checkpoint("s", "step", blob(tc.size))
			}
			if !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), "max_session_log") ||
				!strings.Contains(err.Error(), "start a new session") {
				t.Fatalf("checkpoint over the bound = %v, want ErrQuotaExceeded naming max_session_log", err)
			}
			st, serr := os.Stat(logPath)
			if serr != nil || st.Size() > tc.max {
				t.Fatalf("log is %v bytes (%v), over its bound %d", st.Size(), serr, tc.max)
			}
			// Refused again; nothing partial.
			if _, err := tn.Checkpoint("s", "again", blob(tc.size)); !errors.Is(err, ErrQuotaExceeded) {
				t.Errorf("checkpoint after the bound = %v", err)
			}
			if st2, _ := os.Stat(logPath); st2.Size() != st.Size() {
				t.Errorf("a refused entry changed the log: %d -> %d bytes", st.Size(), st2.Size())
			}
			if sessions, err := tn.ListSessions(); err != nil || len(sessions) != 1 {
				t.Errorf("Sessions = %v, %v", sessions, err)
			}
			// Another session starts empty.
			if _, err := tn.Checkpoint("t", "step", blob(tc.size)); err != nil {
				t.Errorf("new session: %v", err)
			}
		})
	}
}
