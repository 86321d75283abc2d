package vault_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/internal/testutil/piitest"
	"github.com/cexec/cexec/pluginapi/guard"
)

// piiDetector finds emails, phones, cards, IBANs, SSNs and IP addresses
// with plain regular expressions: these tests are about what the vault does
// with spans; the guard-pii plugin's tests cover detection.
type piiDetector = piitest.Detector

var _ vault.Detector = piiDetector{}

// failingDetector fails every call, counting them.
type failingDetector struct{ calls atomic.Int32 }

var errDetect = errors.New("detector exploded")

func (f *failingDetector) Detect(context.Context, guard.DetectRequest) ([]guard.Span, error) {
	f.calls.Add(1)
	return nil, errDetect
}

// fixedDetector returns the same spans whatever the text, for tests that
// need spans in odd places.
type fixedDetector []guard.Span

func (f fixedDetector) Detect(_ context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	var out []guard.Span
	for _, s := range f {
		if s.Start < len(req.Text) {
			out = append(out, s)
		}
	}
	return out, nil
}

func newStore(t testing.TB, dir string, log hclog.Logger) *vault.Store {
	t.Helper()
	s, err := vault.NewStore(vault.Options{DataDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func open(t testing.TB, s *vault.Store, tenant, session string, det vault.Detector) *vault.Vault {
	t.Helper()
	v, err := s.Open(tenant, session, det)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func tokenize(t testing.TB, v *vault.Vault, text string) string {
	t.Helper()
	out, err := v.Tokenize(t.Context(), text)
	if err != nil {
		t.Fatalf("Tokenize(%q): %v", text, err)
	}
	return out
}

func untokenize(t testing.TB, v *vault.Vault, text string) string {
	t.Helper()
	out, err := v.Untokenize(text)
	if err != nil {
		t.Fatalf("Untokenize(%q): %v", text, err)
	}
	return out
}
